#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd from their Go
# modules (through the Go module proxy) into a cache outside the repository, and
# does nothing when they are already there. Prints the directory on stdout.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging
# module with a local path. A throwaway wrapper module requires it and replaces
# each staging module with the matching published v0.x release instead.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
CACHE=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
OUT="$CACHE/bin/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
BINS=(kube-apiserver kube-controller-manager kubectl etcd)

have_all() {
	for b in "${BINS[@]}"; do [ -x "$OUT/$b" ] || return 1; done
}
if have_all; then
	echo "$OUT"
	exit 0
fi

log() { echo "kube-bins: $*" >&2; }
start=$(date +%s)
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

staging_version="v0.${KUBE_VERSION#v1.}"
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}

if [ ! -x "$OUT/etcd" ]; then
	log "building etcd $ETCD_VERSION (about a minute)"
	mkdir -p "$work/etcd"
	(
		cd "$work/etcd"
		go mod init flotilla.local/etcd-build >/dev/null 2>&1
		go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
		go get "go.etcd.io/etcd/server/v3/etcdmain@$ETCD_VERSION" >&2
		cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
		go mod tidy >&2
		CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$OUT/etcd.tmp" . >&2
		mv "$OUT/etcd.tmp" "$OUT/etcd"
	)
fi

log "building kube-apiserver, kube-controller-manager, kubectl $KUBE_VERSION (5-10 minutes on 2 cores, once)"
mkdir -p "$work/kube"
cd "$work/kube"
go mod init flotilla.local/kube-build >/dev/null 2>&1
gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[ -f "$gomod" ] || { log "cannot download k8s.io/kubernetes@$KUBE_VERSION"; exit 1; }
{
	echo "require k8s.io/kubernetes $KUBE_VERSION"
	echo "replace ("
	sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9.-]*\) => ./staging/.*#\1#p' "$gomod" | while read -r m; do
		echo "	$m => $m $staging_version"
	done
	echo ")"
} >> go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
go mod tidy -e >&2
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
mkdir -p "$work/out"
CGO_ENABLED=0 go build -trimpath -tags tools -ldflags="$ldflags" -o "$work/out/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl >&2
for b in kube-apiserver kube-controller-manager kubectl; do mv "$work/out/$b" "$OUT/$b"; done
log "built in $(( $(date +%s) - start ))s into $OUT"
echo "$OUT"
