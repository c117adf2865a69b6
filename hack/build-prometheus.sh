#!/usr/bin/env bash
# Builds Prometheus and promtool (for the dashboard and alert tests) from the Go module proxy (the
# wrapper module in hack/prometheus pins the version and go.sum every dependency's checksum) into
# a cache outside the repo, keyed by version. Service discovery plugins are left out
# (-tags remove_all_sd: the tests scrape static targets), the web UI's assets too (the tests use
# the HTTP API only). Skips the build when both binaries are present. Prints the binaries'
# directory on the last line of stdout. Needs Go, never root: nothing is installed system-wide.
#   HOOKLINE_CACHE_DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/hookline)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
modver() { awk -v m="$2" '($1=="require" && $2==m) {print $3; exit} ($1==m && $2 ~ /^v/) {print $2; exit}' "$1"; }
MOD_VERSION="$(modver "$here/prometheus/go.mod" github.com/prometheus/prometheus)"
# The module's v0.MMM.P is Prometheus 3.MMM-300.P (v0.316.0 is 3.16.0).
minor="$(echo "$MOD_VERSION" | cut -d. -f2)"; patch="$(echo "$MOD_VERSION" | cut -d. -f3)"
PROM_VERSION="$(( minor / 100 )).$(( minor % 100 )).$patch"
cache="${HOOKLINE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hookline}"
dir="$cache/prometheus-$PROM_VERSION"
log() { echo "[prometheus] $*" >&2; }

if [ -x "$dir/prometheus" ] && [ -x "$dir/promtool" ]; then
  log "prometheus and promtool $PROM_VERSION present in $dir"
  echo "$dir"; exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  log "error: Go is not installed (needed once to build Prometheus $PROM_VERSION from the Go module proxy)."
  log "install Go >= 1.26 (https://go.dev/dl) or put prebuilt prometheus and promtool (>= 2.42) in $dir"
  exit 3
fi

start=$(date +%s)
ticker() { while sleep 30; do log "still building ($(( $(date +%s) - start ))s)..."; done; }
ticker & tick=$!
trap 'kill $tick 2>/dev/null || true' EXIT

log "building prometheus and promtool $PROM_VERSION (about 3-6 min cold on 2 cores)..."
v=github.com/prometheus/common/version
ldf="-s -w -X $v.Version=$PROM_VERSION -X $v.Branch=module -X $v.Revision=$MOD_VERSION -X $v.BuildUser=hookline"
mkdir -p "$dir"
tmp="$dir/.tmp.$$"; mkdir -p "$tmp"
# -mod=readonly: go.sum must already hold every checksum; a build never rewrites hack/prometheus.
(cd "$here/prometheus" && CGO_ENABLED=0 go build -mod=readonly -trimpath -tags remove_all_sd -ldflags "$ldf" -o "$tmp/" \
    github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool)
mv "$tmp/prometheus" "$tmp/promtool" "$dir/"
rmdir "$tmp"
log "built in $(( $(date +%s) - start ))s: $("$dir/prometheus" --version 2>&1 | head -1)"
echo "$dir"
