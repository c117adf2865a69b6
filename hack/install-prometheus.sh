#!/usr/bin/env bash
# Installs Prometheus and promtool from Debian's `prometheus` package, for the dashboard and
# alert tests. Skips when both are on PATH. The package's service is NOT started: a
# policy-rc.d that denies service starts is in place during the install (and removed after, if
# we put it there); the tests run their own Prometheus on a free port with a temp config.
# Needs root (apt-get). Prints the directory of the binaries on the last line of stdout.
set -euo pipefail
log() { echo "[prometheus] $*" >&2; }

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  log "present: $(prometheus --version 2>&1 | head -1)"
  dirname "$(command -v promtool)"; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  log "error: apt-get not found: install Prometheus >= 2.42 (prometheus and promtool on PATH) another way"
  exit 3
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi

start=$(date +%s)
policy=/usr/sbin/policy-rc.d
placed=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# placed by hookline hack/install-prometheus.sh during apt-get install\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  placed=1
fi
cleanup() { if [ -n "$placed" ]; then $sudo rm -f "$policy"; fi; }
trap cleanup EXIT

# An old or missing package list finds nothing: refresh it once.
if ! apt-cache show prometheus >/dev/null 2>&1; then
  log "apt-get update..."
  $sudo apt-get update -qq
fi
log "apt-get install prometheus (no recommends; the service is not started)..."
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# If something started it anyway (a systemd host), stop it: the tests never use port 9090.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
log "installed in $(( $(date +%s) - start ))s: $(prometheus --version 2>&1 | head -1)"
dirname "$(command -v promtool)"
