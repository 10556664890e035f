// Command ipc is the agent container's only way to reach the Carapace core:
//
//	ipc <topic> <json-object>
//	ipc <topic> -            (arguments JSON on stdin)
//
// It sends {topic, correlation, arguments} over ZeroMQ and prints the result
// to stdout (exit 0), or the error to stderr as one line of JSON (exit 1;
// exit 2 for bad usage). It never prints a stack trace.
package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"runtime/debug"
)

const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// failure is what we print on stderr, shaped like the core's own errors so
// the agent handles both the same way.
type failure struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retriable bool   `json:"retriable"`
	exit      int
}

func main() {
	// Belt and braces: even a crash outside run's recover must not dump goroutines.
	debug.SetTraceback("none")
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int) {
	defer func() {
		if recover() != nil {
			code = report(stderr, &failure{"IPC_INTERNAL", "internal error in ipc", false, exitError})
		}
	}()

	if len(args) != 2 {
		return report(stderr, usageFailure("usage: ipc <topic> <json-object|->"))
	}
	if f := checkTopic(args[0]); f != nil {
		return report(stderr, f)
	}
	path, f := socketPath()
	if f != nil {
		return report(stderr, f)
	}
	wait, f := timeout()
	if f != nil {
		return report(stderr, f)
	}
	arguments, f := readArguments(args[1], stdin)
	if f != nil {
		return report(stderr, f)
	}
	correlation, err := newCorrelation()
	if err != nil {
		return report(stderr, &failure{"IPC_INTERNAL", "cannot generate a correlation id", false, exitError})
	}
	request, f := buildRequest(args[0], correlation, arguments)
	if f != nil {
		return report(stderr, f)
	}

	reply, f := call(path, request, correlation, wait)
	if f != nil {
		return report(stderr, f)
	}
	if len(reply.Error) > 0 && !bytes.Equal(reply.Error, []byte("null")) {
		writeJSONLine(stderr, reply.Error)
		return exitError
	}
	result := []byte(reply.Result)
	if len(result) == 0 {
		result = []byte("null")
	}
	if !writeJSONLine(stdout, result) {
		return exitError
	}
	return exitOK
}

// report prints a failure as one line of JSON and returns its exit code.
func report(stderr io.Writer, f *failure) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "<topic>" readable; Encode adds the newline
	enc.Encode(f)
	stderr.Write(buf.Bytes())
	return f.exit
}

// writeJSONLine prints JSON compactly (as received, minus whitespace) on one line.
func writeJSONLine(w io.Writer, raw []byte) bool {
	var buf bytes.Buffer
	buf.Grow(len(raw) + 1)
	if json.Compact(&buf, raw) != nil {
		buf.Reset()
		buf.WriteString("null") // unreachable: the reply already parsed as JSON
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err == nil
}
