#!/usr/bin/env bash
# Builds a minimal OpenTelemetry Collector for the tracing tests (the OTLP receiver, the file and
# debug exporters: hack/otelcol/main.go) from the Go module proxy (hack/otelcol/go.mod pins the
# version and go.sum every dependency's checksum) into a cache outside the repo, keyed by version.
# Skips the build when the binary is present. Prints the binary's path on the last line of stdout.
#   HOOKLINE_CACHE_DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/hookline)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
modver() { awk -v m="$2" '($1=="require" && $2==m) {print $3; exit} ($1==m && $2 ~ /^v/) {print $2; exit}' "$1"; }
OTELCOL_VERSION="$(modver "$here/otelcol/go.mod" go.opentelemetry.io/collector/otelcol)"
cache="${HOOKLINE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hookline}"
dir="$cache/otelcol-$OTELCOL_VERSION"
log() { echo "[otelcol] $*" >&2; }

if [ -x "$dir/otelcol-hookline" ]; then
  log "otelcol-hookline $OTELCOL_VERSION present in $dir"
  echo "$dir/otelcol-hookline"; exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  log "error: Go is not installed (needed once to build the OpenTelemetry Collector $OTELCOL_VERSION from the Go module proxy)."
  log "install Go >= 1.25 (https://go.dev/dl) or put a collector with the otlp receiver and the file exporter at $dir/otelcol-hookline"
  exit 3
fi

start=$(date +%s)
ticker() { while sleep 30; do log "still building ($(( $(date +%s) - start ))s)..."; done; }
ticker & tick=$!
trap 'kill $tick 2>/dev/null || true' EXIT

log "building the OpenTelemetry Collector $OTELCOL_VERSION (about 2-4 min cold on 2 cores)..."
mkdir -p "$dir"
tmp="$dir/.tmp.$$"
# -mod=readonly: go.sum must already hold every checksum; a build never rewrites hack/otelcol.
(cd "$here/otelcol" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags '-s -w' -o "$tmp" .)
mv "$tmp" "$dir/otelcol-hookline"
log "built in $(( $(date +%s) - start ))s: $("$dir/otelcol-hookline" --version)"
echo "$dir/otelcol-hookline"
