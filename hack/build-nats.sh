#!/usr/bin/env bash
# Builds nats-server (with JetStream, for stream mode) from the Go module proxy (the wrapper
# module in hack/nats pins the version and every dependency's checksum) into a cache outside the
# repo, keyed by version. Skips the build when the binary is present.
# Prints the binary's path on the last line of stdout.
#   HOOKLINE_CACHE_DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/hookline)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
modver() { awk -v m="$2" '($1=="require" && $2==m) {print $3; exit} ($1==m && $2 ~ /^v/) {print $2; exit}' "$1"; }
NATS_VERSION="$(modver "$here/nats/go.mod" github.com/nats-io/nats-server/v2)"
cache="${HOOKLINE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hookline}"
dir="$cache/nats-server-$NATS_VERSION"
log() { echo "[nats-server] $*" >&2; }

if [ -x "$dir/nats-server" ]; then
  log "nats-server $NATS_VERSION present in $dir"
  echo "$dir/nats-server"; exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  log "error: Go is not installed (needed once to build nats-server $NATS_VERSION from the Go module proxy)."
  log "install Go >= 1.24 (https://go.dev/dl) or put a prebuilt nats-server $NATS_VERSION at $dir/nats-server"
  exit 3
fi

start=$(date +%s)
ticker() { while sleep 30; do log "still building ($(( $(date +%s) - start ))s)..."; done; }
ticker & tick=$!
trap 'kill $tick 2>/dev/null || true' EXIT

log "building nats-server $NATS_VERSION (about 30-90 s cold on 2 cores)..."
mkdir -p "$dir"
tmp="$dir/.tmp.$$"
# -mod=readonly: go.sum must already hold every checksum; a build never rewrites hack/nats.
(cd "$here/nats" && go mod download && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags '-s -w' -o "$tmp" github.com/nats-io/nats-server/v2)
mv "$tmp" "$dir/nats-server"
log "nats-server built in $(( $(date +%s) - start ))s: $("$dir/nats-server" --version)"
echo "$dir/nats-server"
