#!/bin/sh
# Carapace agent entrypoint. Runs as `node` on a read-only root filesystem.
#
#   idle       warm container for the core (legacy mode, --network none): run the
#              loopback forwarder that gives Claude Code ANTHROPIC_BASE_URL
#              (127.0.0.1:$CARAPACE_LLM_PORT -> $CARAPACE_LLM_SOCKET, the session's
#              host-side LLM proxy). The core then `docker exec`s `claude -p ...` per
#              message. The forwarder is the container's main process: if it dies, the
#              container stops and the core sees it.
#   [claude] <args>   `claude <args>` directly (a leading `claude` is accepted too).
#
# Not implemented yet (do not assume it exists): API mode's HTTP server (claude-cli-api).
set -eu

# API mode: the core bind-mounts a *directory* at /run/api holding a one-time bearer
# token. Read it once and delete it, so it lives only in this process tree's memory.
# If it cannot be deleted (e.g. the file itself was bind-mounted), `set -e` stops here:
# a token left readable on disk is worse than not starting.
if [ -f /run/api/.api-key ]; then
  API_KEY=$(cat /run/api/.api-key)
  rm -f /run/api/.api-key
  export API_KEY
  echo '{"code":"NOT_IMPLEMENTED","message":"API mode is not in this image yet","retriable":false}' >&2
  exit 1
fi

if [ "${1:-}" = idle ]; then
  exec node /usr/local/lib/carapace/llm-forwarder.mjs
fi

if [ "${1:-}" = claude ]; then shift; fi
exec claude "$@"
