#!/bin/sh
# Core container start: as root, make the state volumes the node user's and learn the
# Docker socket's group; then run the core as node with only that extra group.
set -eu
for dir in /app/volumes/data /app/volumes/logs /app/volumes/groups; do
  mkdir -p "$dir"
  chown node:node "$dir"
done
# Plugins keep their data in data/plugins/<name>/, the one part of the data volume the
# plugin host mounts: an older installation's data/<name>/ moves there once, before the
# core starts (the plugin host starts no plugin until the core is there).
mkdir -p /app/volumes/data/plugins
for manifest in /app/plugins/*/manifest.json; do
  [ -f "$manifest" ] || continue
  name=$(basename "$(dirname "$manifest")")
  if [ -d "/app/volumes/data/$name" ] && [ ! -e "/app/volumes/data/plugins/$name" ]; then
    mv "/app/volumes/data/$name" "/app/volumes/data/plugins/$name"
  fi
done
if [ -f /app/volumes/data/.held-events.json ] && [ ! -e /app/volumes/data/plugins/.held-events.json ]; then
  mv /app/volumes/data/.held-events.json /app/volumes/data/plugins/.held-events.json
fi
# The core writes carapace.json (first start, pairing); the plugin host never sees it (the core hands it each plugin's section).
if [ -w /app/volumes/config ]; then chown node:node /app/volumes/config; fi
groups=node
if [ -S /var/run/docker.sock ]; then
  groups="node,$(stat -c %g /var/run/docker.sock)"
fi
exec setpriv --reuid=node --regid=node --groups="$groups" --inh-caps=-all --bounding-set=-all "$@"
