#!/usr/bin/env bash
# Builds the Helm CLI from the Go module proxy (the wrapper module in hack/helm pins the version)
# into a cache outside the repo, keyed by version, with the same ldflags as Helm's own Makefile
# (version, and the Kubernetes version `helm template` and `helm lint` assume by default).
# Skips the build when the binary is present. Prints the binary's path on the last line of stdout.
#   HOOKLINE_CACHE_DIR  cache root (default ${XDG_CACHE_HOME:-~/.cache}/hookline)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
modver() { awk -v m="$2" '($1=="require" && $2==m) {print $3; exit} ($1==m && $2 ~ /^v/) {print $2; exit}' "$1"; }
HELM_VERSION="$(modver "$here/helm/go.mod" helm.sh/helm/v3)"
CLIENT_GO_VERSION="$(modver "$here/helm/go.mod" k8s.io/client-go)"
cache="${HOOKLINE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hookline}"
dir="$cache/helm-$HELM_VERSION"
log() { echo "[helm] $*" >&2; }

if [ -x "$dir/helm" ]; then
  log "helm $HELM_VERSION present in $dir"
  echo "$dir/helm"; exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  log "error: Go is not installed (needed once to build helm $HELM_VERSION from the Go module proxy)."
  log "install Go >= 1.24 or put a helm binary at $dir/helm"
  exit 3
fi

start=$(date +%s)
log "building helm $HELM_VERSION (about 2-5 minutes cold on 2 cores)..."
# Helm's Makefile: the default Kubernetes version is client-go's minor on major 1 (v0.37 -> 1.37).
k8s_minor="$(echo "$CLIENT_GO_VERSION" | cut -d. -f2)"
ldf="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldf="$ldf -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
mkdir -p "$dir"
tmp="$dir/.tmp.$$"
(cd "$here/helm" && go mod download && CGO_ENABLED=0 go build -trimpath -ldflags "$ldf" -o "$tmp" helm.sh/helm/v3/cmd/helm)
mv "$tmp" "$dir/helm"
log "helm $HELM_VERSION built in $(( $(date +%s) - start ))s: $("$dir/helm" version --short)"
echo "$dir/helm"
