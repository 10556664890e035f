#!/bin/sh
# Carapace agent entrypoint. Runs as `node` on a read-only root filesystem.
#
#   [claude] <args>   legacy mode (--network none): `claude <args>` as the container's main
#              process (a leading `claude` is accepted too). The core attaches to its
#              stdin/stdout (stream-json) and it reaches the model over plain HTTP on
#              ANTHROPIC_UNIX_SOCKET, the session's host-side LLM proxy socket: nothing
#              else runs beside it. If it exits, the container stops and the core sees it.
#   api        API mode (also --network none): the HTTP server (api-server.mjs) as the
#              main process, on the unix socket $CARAPACE_API_SOCKET (in /run/api, the
#              core's per-container mount); it runs Claude Code, which reaches the model over
#              ANTHROPIC_UNIX_SOCKET exactly as in legacy mode.
#   idle       sleeps, no Claude Code (diagnostics).
set -eu

# API mode: the core bind-mounts a *directory* at /run/api holding a one-time bearer
# token. Read it once and delete it, so it lives only in the server's memory and
# environment. If it cannot be deleted (e.g. the file itself was bind-mounted), `set -e`
# stops here: a token left readable on disk is worse than not starting. It is not
# exported until the last line, so only the server process gets it.
api_key=
if [ -f /run/api/.api-key ]; then
  api_key=$(cat /run/api/.api-key)
  rm -f /run/api/.api-key
  if [ -e /run/api/.api-key ]; then
    echo '{"code":"API_KEY_NOT_DELETED","message":"/run/api/.api-key could not be deleted","retriable":false}' >&2
    exit 1
  fi
  if [ "${1:-}" != api ]; then
    echo '{"code":"API_KEY_UNEXPECTED","message":"a bearer token was mounted but API mode was not asked for","retriable":false}' >&2
    exit 1
  fi
fi

if [ "${1:-}" = api ]; then
  if [ -z "$api_key" ]; then
    echo '{"code":"API_KEY_MISSING","message":"API mode needs the bearer token at /run/api/.api-key","retriable":false}' >&2
    exit 1
  fi
  API_KEY=$api_key
  unset api_key
  export API_KEY
  exec node /usr/local/lib/carapace/api-server.mjs
fi

if [ "${1:-}" = idle ]; then
  exec sleep infinity
fi

if [ "${1:-}" = claude ]; then shift; fi
exec claude "$@"
