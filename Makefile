# Carapace: one entry point for people and CI.
SHELL := /bin/bash
IPC_BIN := dist/bin/ipc
GO_ENV := CGO_ENABLED=0 GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local

.PHONY: all build ipc images test bench logs up down ps e2e clean

all: build

# `npm install` honours the committed lockfile; `npm ci` refuses it here because the
# registry mirror omits other platforms' optional packages from the lock.
node_modules: package.json package-lock.json
	npm install --no-audit --no-fund
	@touch node_modules

build: node_modules ipc
	npx tsc -p tsconfig.json

# Static ipc binary from Go's standard library only (no module downloads).
ipc: $(IPC_BIN)
$(IPC_BIN): $(wildcard ipc/*.go) ipc/go.mod
	@mkdir -p $(dir $@)
	cd ipc && $(GO_ENV) go build -trimpath -ldflags='-s -w' -o ../$(IPC_BIN) .

# The images the appliance runs; tests start real agent containers from them.
# --network host: builds reach the package registries the way this machine does.
DOCKER ?= docker
images:
	$(DOCKER) build --network host -f Dockerfile.core -t carapace-core .
	$(DOCKER) build --network host -f Dockerfile.agent -t carapace-agent .

test: build images
	node --experimental-vm-modules node_modules/jest/bin/jest.js

bench: build images
	node dist/bench/run.js
	DOCKER=$(DOCKER) node dist/bench/agent-start.js
	@if [ -f dist/bench/memory-bench.js ]; then node dist/bench/memory-bench.js; fi

# Follow the JSONL audit log in a form a person can read.
logs:
	@touch volumes/logs/audit.jsonl
	@tail -n 100 -F volumes/logs/audit.jsonl | node dist/core/src/audit/pretty.js

up:
	docker compose up -d
down:
	docker compose down
ps:
	docker compose ps

clean:
	rm -rf dist
