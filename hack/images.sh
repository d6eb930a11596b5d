#!/usr/bin/env bash
# Builds every image the compose stack and the container tests use, on a Docker engine with no
# registry: nothing is pulled. Binaries are built on the host (Go module proxy) and each image
# is `docker build` of a context holding only them, FROM scratch; PostgreSQL comes from
# Debian's packages through a debootstrap root filesystem, imported once and cached in
# ~/.cache/flotilla/images. Idempotent: an image whose context has not changed is kept.
#
# Prints on stdout (and writes to ~/.cache/flotilla/images/compose.env) the variables
# docker-compose.yaml takes its image names from, for `eval` or an env file:
#   FLOTILLA_NATS_IMAGE, FLOTILLA_POSTGRES_IMAGE, FLOTILLA_MEMBER_IMAGE
# Service images are flotilla/<service>:dev, the names docker-compose.yaml gives them.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
CACHE=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
IMAGES="$CACHE/images"
SUITE=${DEBIAN_SUITE:-bookworm}
PG_MAJOR=${PG_MAJOR:-15}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SERVICES=(scheduler rollout status apply hubsync fleetctl)

begin=$(date +%s)
log() { printf 'images: [%3ds] %s\n' "$(($(date +%s) - begin))" "$*" >&2; }
die() { log "$*"; exit 1; }
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$IMAGES"

# build TAG DIR DOCKERFILE [ARGS...]: docker build of DIR unless TAG already holds an image of
# exactly this context (a label records the context's checksum).
build() {
	local tag=$1 dir=$2 dockerfile=$3 sum have
	shift 3
	cp "$dockerfile" "$dir/Dockerfile"
	sum=$(cd "$dir" && find . -type f -o -type l | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-64)
	sum="$sum-$(printf '%s' "$*" | sha256sum | cut -c1-16)"
	have=$(docker image inspect -f '{{index .Config.Labels "dev.flotilla.context"}}' "$tag" 2>/dev/null || true)
	if [ "$have" = "$sum" ]; then
		log "$tag is up to date"
		return
	fi
	log "building $tag"
	DOCKER_BUILDKIT=0 docker build -q --label "dev.flotilla.context=$sum" "$@" -t "$tag" "$dir" >/dev/null 2>"$work/build.log" ||
		{ cat "$work/build.log" >&2; die "docker build of $tag failed"; }
}

gobuild() { # gobuild OUT PKG (in the current module)
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$1" "$2"
}

log "building the static binaries on the host (Go's build cache makes this quick after the first time)"
mkdir -p "$work/bin"
(cd deploy/docker/healthcheck && GOWORK=off gobuild "$work/bin/healthcheck" .)
for s in "${SERVICES[@]}"; do
	main="./services/$s/cmd/$s"
	[ -d "$main" ] || main="./services/$s"
	log "  $s"
	gobuild "$work/bin/$s" "$main"
done
nats_version=$(cd harness && go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
log "  nats-server $nats_version (the version go.mod names)"
(cd harness && gobuild "$work/bin/nats-server" github.com/nats-io/nats-server/v2)
log "  kube-member"
(cd harness && gobuild "$work/bin/kube-member" ./cmd/kube-member)

ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || die "no CA bundle at $ca (Debian: apt-get install ca-certificates)"
for s in "${SERVICES[@]}"; do
	ctx="$work/ctx-$s"
	mkdir -p "$ctx"
	cp "$work/bin/$s" "$ctx/flotilla"
	cp "$work/bin/healthcheck" "$ca" "$ctx/"
	build "flotilla/$s:dev" "$ctx" deploy/docker/local/service.Dockerfile --build-arg "SERVICE=$s"
done

nats_image="flotilla-local/nats:$nats_version"
mkdir -p "$work/ctx-nats"
cp "$work/bin/nats-server" "$work/bin/healthcheck" "$work/ctx-nats/"
build "$nats_image" "$work/ctx-nats" deploy/docker/local/nats.Dockerfile --build-arg "VERSION=$nats_version"

# PostgreSQL: Debian's package in a debootstrap root filesystem, imported as a base image.
rootfs="$IMAGES/postgresql-$PG_MAJOR-$SUITE.tar"
base="flotilla-local/debian-postgresql:$PG_MAJOR-$SUITE"
if [ ! -s "$rootfs" ]; then
	command -v debootstrap >/dev/null || die "debootstrap is missing: run make deps (hack/deps.sh installs it)"
	[ "$(id -u)" -eq 0 ] && sudo="" || sudo=sudo
	log "making a $SUITE root filesystem with postgresql-$PG_MAJOR (debootstrap from $MIRROR, about 5 minutes, once)"
	$sudo debootstrap --variant=minbase --include="postgresql-$PG_MAJOR" "$SUITE" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
	# What a server in a container never uses: the package's own cluster, apt's caches,
	# documentation, translations, and the JIT (LLVM is a third of the size).
	$sudo rm -rf "$work/rootfs/var/lib/postgresql/$PG_MAJOR" "$work/rootfs/etc/postgresql/$PG_MAJOR" \
		"$work/rootfs/var/cache/apt" "$work/rootfs/var/lib/apt/lists" "$work/rootfs/usr/share/doc" \
		"$work/rootfs/usr/share/man" "$work/rootfs/usr/share/info" "$work/rootfs/usr/share/locale" \
		"$work/rootfs/usr/share/i18n" "$work/rootfs/usr/lib/postgresql/$PG_MAJOR/lib/bitcode" \
		"$work/rootfs/usr/lib/postgresql/$PG_MAJOR/lib/llvmjit"* "$work/rootfs/usr/lib/x86_64-linux-gnu/libLLVM"* \
		"$work/rootfs/usr/lib/x86_64-linux-gnu/libz3"*
	$sudo tar -C "$work/rootfs" --numeric-owner -cf "$rootfs.tmp" .
	$sudo rm -rf "$work/rootfs"
	mv "$rootfs.tmp" "$rootfs"
	docker image rm "$base" >/dev/null 2>&1 || true
fi
if ! docker image inspect "$base" >/dev/null 2>&1; then
	log "importing $rootfs as $base"
	docker import \
		--change "ENV PATH=/usr/lib/postgresql/$PG_MAJOR/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		--change "ENV PGDATA=/var/lib/postgresql/data" \
		--change "ENV LANG=C.UTF-8" \
		--change "EXPOSE 5432" \
		"$rootfs" "$base" >/dev/null
fi
postgres_image="flotilla-local/postgres:$PG_MAJOR-$SUITE"
mkdir -p "$work/ctx-postgres"
cp deploy/docker/local/docker-entrypoint.sh "$work/ctx-postgres/"
build "$postgres_image" "$work/ctx-postgres" deploy/docker/local/postgres.Dockerfile \
	--build-arg "BASE=$base" --label "dev.flotilla.base=$(docker image inspect -f '{{.Id}}' "$base")"

kube_dir=$(bash hack/kube-bins.sh)
kube_version=$(basename "$kube_dir")
kube_version=${kube_version#kube-}
member_image="flotilla-local/kube-member:${kube_version%%-etcd-*}"
mkdir -p "$work/ctx-member"
cp "$kube_dir/etcd" "$kube_dir/kube-apiserver" "$kube_dir/kube-controller-manager" \
	"$work/bin/kube-member" "$work/bin/healthcheck" "$work/ctx-member/"
build "$member_image" "$work/ctx-member" deploy/docker/local/kube-member.Dockerfile --build-arg "VERSION=$kube_version"

log "done in $(($(date +%s) - begin))s:"
docker image ls --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | grep -E '^flotilla(-local)?/' | grep -v debian-postgresql | sed 's/^/  /' >&2 || true
# Also kept in the cache, for commands that only need the names (hack/compose.sh down).
printf '%s\n' "FLOTILLA_NATS_IMAGE=$nats_image" "FLOTILLA_POSTGRES_IMAGE=$postgres_image" \
	"FLOTILLA_MEMBER_IMAGE=$member_image" | tee "$IMAGES/compose.env"
