#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager (Kubernetes) and etcd from the Go module proxy
# into a cache outside the repo, keyed by version. Skips what is already built.
# Prints the bin directory on the last line of stdout.
#   HOOKLINE_CACHE_DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/hookline)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
modver() { awk -v m="$2" '($1=="require" && $2==m) {print $3; exit} ($1==m && $2 ~ /^v/) {print $2; exit}' "$1"; }
K8S_VERSION="$(modver "$here/k8s/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(modver "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)"
cache="${HOOKLINE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hookline}"
bin="$cache/k8s-$K8S_VERSION-etcd-$ETCD_VERSION/bin"

log() { echo "[control-plane] $*" >&2; }

mkdir -p "$bin"
need=()
for b in kube-apiserver kube-controller-manager etcd; do [ -x "$bin/$b" ] || need+=("$b"); done
if [ ${#need[@]} -eq 0 ]; then
  log "binaries present in $bin (Kubernetes $K8S_VERSION, etcd $ETCD_VERSION)"
  echo "$bin"; exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  log "error: Go is not installed (needed once to build kube-apiserver and etcd from the Go module proxy)."
  log "install Go >= 1.24 (https://go.dev/dl) or put a prebuilt kube-apiserver, kube-controller-manager and etcd in $bin"
  exit 3
fi

# Keep progress visible: a cold build takes minutes on 2 cores.
start=$(date +%s)
ticker() { while sleep 30; do log "still building ($(( $(date +%s) - start ))s)..."; done; }
ticker & tick=$!
trap 'kill $tick 2>/dev/null || true' EXIT

tmp="$bin/.tmp.$$"; mkdir -p "$tmp"
if [ ! -x "$bin/etcd" ]; then
  log "building etcd $ETCD_VERSION (about 1-3 minutes cold)..."
  (cd "$here/etcd" && go mod download && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  mv "$tmp/etcd" "$bin/etcd"
  log "etcd built ($(( $(date +%s) - start ))s)"
fi
if [ ! -x "$bin/kube-apiserver" ] || [ ! -x "$bin/kube-controller-manager" ]; then
  minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  ldf="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
  ldf="$ldf -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  ldf="$ldf -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  log "building kube-apiserver and kube-controller-manager $K8S_VERSION (10-25 minutes cold on 2 cores, seconds when GOCACHE is warm)..."
  (cd "$here/k8s" && go mod download && CGO_ENABLED=0 go build -trimpath -ldflags "$ldf" -o "$tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
  mv "$tmp/kube-apiserver" "$tmp/kube-controller-manager" "$bin/"
  log "Kubernetes binaries built ($(( $(date +%s) - start ))s)"
fi
rmdir "$tmp" 2>/dev/null || true
echo "$bin"
