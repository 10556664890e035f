module carapace/ipc

go 1.19
