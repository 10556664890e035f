#!/bin/sh
# Core container start: as root, make the state volumes the node user's and learn the
# Docker socket's group; then run the core as node with only that extra group.
set -eu
for dir in /app/volumes/data /app/volumes/logs /app/volumes/groups; do
  mkdir -p "$dir"
  chown node:node "$dir"
done
# The core writes carapace.json (first start, pairing); the plugin host has it read-only.
if [ -w /app/volumes/config ]; then chown node:node /app/volumes/config; fi
groups=node
if [ -S /var/run/docker.sock ]; then
  groups="node,$(stat -c %g /var/run/docker.sock)"
fi
exec setpriv --reuid=node --regid=node --groups="$groups" --inh-caps=-all --bounding-set=-all "$@"
