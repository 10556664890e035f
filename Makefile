# Carapace: one entry point for people and CI.
SHELL := /bin/bash
IPC_BIN := dist/bin/ipc
# Debian's packaged Rust, never a rustup toolchain that may come first on PATH.
CARGO := RUSTC=/usr/bin/rustc /usr/bin/cargo
IPC_TARGET := x86_64-unknown-linux-gnu

.PHONY: all build ipc images test bench soak soak-appliance chaos logs doctor token up down ps e2e clean plugin check-plugin backup restore

all: build

# Exactly the committed lockfile. (package.json pins unrs-resolver, which jest pulls in,
# to 1.12.2 through "overrides": the registry mirror here lacks 1.13.0's bindings for
# other platforms, and a lock without them is one `npm ci` refuses everywhere.)
node_modules: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch node_modules

build: node_modules ipc
	npx tsc -p tsconfig.json

# Static ipc binary in Rust, offline from Debian's crates only (ipc/.cargo/config.toml
# has the source replacement, the target and the static-link flags).
ipc: $(IPC_BIN)
$(IPC_BIN): $(wildcard ipc/src/*.rs) ipc/Cargo.toml ipc/Cargo.lock ipc/.cargo/config.toml
	cd ipc && $(CARGO) build --locked --release
	install -D -m 0755 ipc/target/$(IPC_TARGET)/release/ipc $(IPC_BIN)

# The images the appliance runs; tests start real agent containers from them.
# --network host: builds reach the package registries the way this machine does.
# AGENT_IMAGE: another tag for the agent image (the docker tests read $$CARAPACE_AGENT_IMAGE);
# SANDBOX_IMAGE the same for the image agents' programs run in ($$CARAPACE_SANDBOX_IMAGE).
DOCKER ?= docker
AGENT_IMAGE ?= carapace-agent:latest
SANDBOX_IMAGE ?= carapace-sandbox:latest

# Compose: v2 (`$(DOCKER) compose`) when the client has it, else v1 (`docker-compose`, as
# Debian packages it). Worked out once, the first time a recipe needs it; with neither,
# those recipes stop with one line saying how to get one.
COMPOSE_MISSING := carapace: neither `docker compose` (Compose v2) nor `docker-compose` was found: install Docker's compose plugin (docker-compose-plugin) or `apt-get install docker-compose`
COMPOSE = $(eval COMPOSE := $(or $(shell if $(DOCKER) compose version >/dev/null 2>&1; then echo '$(DOCKER) compose'; elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; fi),$(error $(COMPOSE_MISSING))))$(COMPOSE)
images:
	$(DOCKER) build --network host -f Dockerfile.core -t carapace-core .
	$(DOCKER) build --network host -f Dockerfile.agent -t $(AGENT_IMAGE) .
	$(DOCKER) build --network host -f Dockerfile.sandbox -t $(SANDBOX_IMAGE) .

# ipc's own unit tests (ZMTP framing, arguments), then every jest suite; agents run in
# gVisor where the engine has runsc (agents.runtime auto). Then the agent suites (lockdown,
# attacks from inside, end to end) once more under runc, so that both runtimes are tested.
AGENT_SUITES := docker/agents docker/agent-files docker/e2e docker/email-agent docker/api-mode docker/api-mode-isolation docker/llm-attacks docker/session-guard docker/external-content docker/workspace-labels \
	docker/sandbox-runs docker/sandbox-attacks docker/skills docker/skill-attacks
test: build images
	cd ipc && $(CARGO) test --locked --release
	node --experimental-vm-modules node_modules/jest/bin/jest.js
	@if $(DOCKER) info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then \
	  echo "the agent suites again, under runc"; \
	  CARAPACE_AGENT_RUNTIME=runc node --experimental-vm-modules node_modules/jest/bin/jest.js $(addprefix dist/core/test/,$(AGENT_SUITES)); \
	fi

# The end-to-end scenarios alone: Telegram message → real agent container with the real
# Claude Code CLI → ipc → plugins → Telegram (and a mail → the agent → its reply, approved),
# in both agent modes and with the appliance itself (compose.yaml's core starting agents
# as sibling containers).
e2e: build images
	node --experimental-vm-modules node_modules/jest/bin/jest.js dist/core/test/docker/e2e dist/core/test/docker/email-agent dist/core/test/docker/api-mode dist/core/test/docker/appliance

# BASELINE=<git ref>: only the pipeline phases, this tree and the ref alternately, with ratios
# (bench/baseline.ts builds the ref in a worktree of its own, once).
bench: build images
ifdef BASELINE
	BASELINE='$(BASELINE)' node dist/bench/baseline.js
else
	node dist/bench/run.js
	DOCKER=$(DOCKER) node dist/bench/agent-start.js
	node dist/bench/memory-bench.js
	node dist/bench/audit-flood.js
	node dist/bench/session-guard-bench.js
	node dist/bench/plugin-processes.js
	DOCKER=$(DOCKER) node dist/bench/sandbox-runs.js
endif

# The fault suite alone (it is also part of `make test`): each fault injected for real
# (kill -9 of the core, mid-turn too, and of the plugin host; a full tmpfs under the audit
# log; corrupt or truncated files; a core that stays away) and what the user and the
# operator were told. README "Faults and recovery" maps each fault to its test.
CHAOS_SUITES := integration/core-restart integration/lifecycle integration/plugin-isolation integration/audit-full-disk integration/audit-file \
	integration/memory integration/telegram integration/llm-proxy integration/tasks unit/unfinished-turns docker/appliance \
	integration/prompts-restart integration/turn-without-reply integration/message-burst docker/disk-quota integration/event-receipts \
	integration/backup-refusals integration/backup-restore
CHAOS_TESTS := kill|SIGKILL|SIGTERM|killed|full|corrupt|damaged|fresh line|restart|registers again|gives up|not handled|docker compose stop|without a reply|RESULT_UNKNOWN|burst|budget is spent|cannot hold it|backup|restore
chaos: build images
	node --experimental-vm-modules node_modules/jest/bin/jest.js $(addprefix dist/core/test/,$(addsuffix .test.js,$(CHAOS_SUITES))) -t '$(CHAOS_TESTS)'

# Ten minutes of steady mixed load on a real core and plugin host (SOAK_MINUTES to change):
# RSS per minute and its slope, latency per minute and its drift. Not part of `make bench`.
soak: build
	node dist/bench/soak.js

# The appliance's soak (issue 22): compose.yaml with real agent containers and Claude Code,
# three groups on the Telegram stand-in (one also on the web chat), a scripted model, ~36
# messages a minute with memories and approvals, for SOAK_MINUTES (default 60). Per minute:
# core / plugin host / plugins RSS, the core's heap, replies and their p50/p99; at the end
# each half's slope (MB/min). SOAK_FORGET_MINUTES=10: each group's conversation cleared that
# often (its agent ends; the next message starts a fresh session). SOAK_HEAP_SNAPSHOTS=5,15:
# the core's heap after those minutes, into dist/soak/ (dist/bench/heap-diff.js compares
# two). Needs Docker; not part of `make test` or `make bench`.
soak-appliance: build images
	DOCKER=$(DOCKER) node dist/bench/soak-appliance.js

# Plugin authors. `make plugin NAME=<name>`: a new plugin from plugins/_template in the
# drop-in folder volumes/plugins/<name>/ (refuses a bad name or an existing folder).
# `make check-plugin DIR=<folder>`: its manifest, tool schemas, handler, skill examples and
# network declaration checked as the core will load them; its code is not run.
# Both need only the TypeScript compiled (not the ipc binary or the images); no
# node_modules prerequisite, which would run `npm ci` wherever package.json looks newer.
PLUGIN_TOOLS := dist/core/src/plugins/check-plugin.js
$(PLUGIN_TOOLS): $(shell find core plugins -name '*.ts' 2>/dev/null)
	npx tsc -p tsconfig.json
	@touch $@
plugin: $(PLUGIN_TOOLS)
	@test -n "$(NAME)" || { echo 'usage: make plugin NAME=<name>' >&2; exit 2; }
	@node dist/core/src/plugins/new-plugin.js '$(NAME)'
check-plugin: $(PLUGIN_TOOLS)
	@test -n "$(DIR)" || { echo 'usage: make check-plugin DIR=<plugin folder>' >&2; exit 2; }
	@node dist/core/src/plugins/check-plugin.js '$(DIR)'

# Follow the JSONL audit log in a form a person can read.
# The formatter runs in the core's image (nothing needs to be built on the host); tail -F
# follows audit.jsonl across rotation.
logs:
	@mkdir -p volumes/logs && touch volumes/logs/audit.jsonl
	@tail -n 100 -F volumes/logs/audit.jsonl | $(DOCKER) run --rm -i --network none -e CARAPACE_COLOR=$$([ -t 1 ] && echo 1 || echo 0) carapace-core:latest node dist/core/src/audit/pretty.js

# What the appliance needs, checked now (model key, Docker, agent image, plugins, disk),
# each problem with its fix; non-zero when something is broken. Exit status 1 is the
# doctor's "something is broken" only while the core's container answers an exec at all
# (docker-compose v1 says nothing when it does not). -T: no pseudo-terminal, which
# docker-compose v1 cannot have when make's input is not a terminal.
CORE_DOWN = echo 'carapace: the core is not running: start it with `$(COMPOSE) up -d`; see `$(COMPOSE) logs core`'
doctor:
	@$(COMPOSE) exec -T core node dist/core/src/admin/cli.js doctor || { s=$$?; [ $$s -eq 1 ] && $(COMPOSE) exec -T core true >/dev/null 2>&1 || $(CORE_DOWN); exit 1; }

# The admin token for the console's login (made on the core's first start). Right after
# `docker compose up -d` the core's container may still be starting: wait for it (while
# Compose lists it, at most TOKEN_WAIT_S seconds); the CLI in it then waits, as long at
# most, for the core to write the token. A core that is not there is said at once.
TOKEN_WAIT_S ?= 60
token:
	@for ((i = 0; i < $(TOKEN_WAIT_S); i++)); do $(COMPOSE) exec -T core true >/dev/null 2>&1 && break; [ -n "$$($(COMPOSE) ps -q core 2>/dev/null)" ] || break; sleep 1; done; \
	$(COMPOSE) exec -T -e CARAPACE_TOKEN_WAIT_S=$(TOKEN_WAIT_S) core node dist/core/src/admin/cli.js token || { $(COMPOSE) exec -T core true >/dev/null 2>&1 || $(CORE_DOWN); exit 1; }

# Backups (README "Backups"). `make backup [SECRETS=1]`: a consistent archive of the running
# (or stopped) appliance in $(BACKUPS), its path the last line printed; SECRETS=1 adds .env
# and the admin token. `make restore ARCHIVE=<file> [FORCE=1]`: verified whole first, then
# restored into volumes/ (empty, or replaced with FORCE=1); never into a running appliance.
# Both run the core's image as root in a one-off container (it reads the plugins' 0700
# folders; workspace images through the Docker socket), as whoever runs make gets the result.
# The folder: CARAPACE_BACKUPS (environment, or .env), else ./backups.
BACKUPS = $(abspath $(or $(CARAPACE_BACKUPS),$(shell sed -n 's/^CARAPACE_BACKUPS=//p' .env 2>/dev/null | tail -n 1 | tr -d '"'"'"),backups))
yes = $(filter 1 yes true,$(1))
BACKUP_CLI = --entrypoint node core dist/core/src/backup/cli.js
backup:
	@mkdir -p '$(BACKUPS)'
	@$(COMPOSE) run --rm --no-deps -T -u root -v '$(BACKUPS)':/backups $(if $(call yes,$(SECRETS)),$(if $(wildcard .env),-v '$(CURDIR)/.env':/secrets/.env:ro)) $(BACKUP_CLI) \
	  create --out /backups --host-dir '$(BACKUPS)' --owner "$$(id -u):$$(id -g)" $(if $(call yes,$(SECRETS)),--secrets --dotenv /secrets/.env)

restore:
	@test -n '$(ARCHIVE)' || { echo 'usage: make restore ARCHIVE=<archive> [FORCE=1]' >&2; exit 2; }
	@test -f '$(ARCHIVE)' || { echo 'carapace: BACKUP_NOT_FOUND: $(ARCHIVE) does not exist; give the path of an archive made by `make backup`' >&2; exit 1; }
	@running=$$($(COMPOSE) ps -q 2>/dev/null | xargs -r $(DOCKER) inspect -f '{{if .State.Running}}{{.Name}}{{end}}' 2>/dev/null | tr -d / | xargs); \
	  if [ -n "$$running" ]; then echo "carapace: RESTORE_RUNNING: the appliance is running ($$running); stop it first (\`make down\`), then restore" >&2; exit 1; fi
	@$(COMPOSE) run --rm --no-deps -T -u root -v '$(abspath $(dir $(ARCHIVE)))':/restore:ro -v '$(CURDIR)':/project $(BACKUP_CLI) \
	  restore '/restore/$(notdir $(ARCHIVE))' --dotenv /project/.env --owner "$$(id -u):$$(id -g)" $(if $(call yes,$(FORCE)),--force)

up:
	$(COMPOSE) up -d
down:
	$(COMPOSE) down
ps:
	$(COMPOSE) ps

clean:
	rm -rf dist ipc/target
