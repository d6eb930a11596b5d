#!/usr/bin/env bash
# Runs docker compose on the stack of docker-compose.yaml plus two local member clusters
# (deploy/docker/compose.local.yaml), from images built here (hack/images.sh): no registry.
# Makes what is missing first: the compose v2 plugin (hack/compose-v2.sh), the images, and the
# TLS files (deploy/tls.sh, in FLOTILLA_TLS_DIR, default ./tls).
#
#   hack/compose.sh up       start everything, wait until every service is healthy
#   hack/compose.sh down     stop and remove the containers (volumes stay; down -v drops them)
#   hack/compose.sh ARGS...  any other docker compose command on the same files
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
compose=$(bash hack/compose-v2.sh)
files=(-f docker-compose.yaml -f deploy/docker/compose.local.yaml)
export FLOTILLA_TLS_DIR=${FLOTILLA_TLS_DIR:-$PWD/tls}

env="${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}/images/compose.env"
# names: the image names of the last build (compose resolves them even to stop a stack).
names() {
	if [ -f "$env" ]; then
		set -a
		# shellcheck disable=SC1090
		. "$env"
		set +a
	fi
}
# images builds what changed, unless FLOTILLA_IMAGES_BUILT=1 says it was just done.
images() {
	if [ "${FLOTILLA_IMAGES_BUILT:-}" = 1 ] && [ -f "$env" ]; then
		names
		return
	fi
	bash hack/images.sh >/dev/null
	names
}

# write_dotenv writes ./.env, which plain `docker compose` reads in this directory, so that
# `docker compose --profile tools run --rm -T fleetctl ...` works on this stack too: the local
# members' file and the local image names. A .env written by someone else is left alone, and
# FLOTILLA_COMPOSE_DOTENV=0 (the tests' stacks) writes none.
marker="# Written by hack/compose.sh up (the local stack of make compose-up). Delete it to use the public images."
write_dotenv() {
	[ "${FLOTILLA_COMPOSE_DOTENV:-1}" = 1 ] || return 0
	if [ -f .env ] && [ "$(head -1 .env)" != "$marker" ]; then
		echo "compose: ./.env is not ours; plain docker compose needs -f ${files[*]} and the image variables" >&2
		return
	fi
	{
		echo "$marker"
		echo "COMPOSE_FILE=docker-compose.yaml:deploy/docker/compose.local.yaml"
		echo "FLOTILLA_NATS_IMAGE=$FLOTILLA_NATS_IMAGE"
		echo "FLOTILLA_POSTGRES_IMAGE=$FLOTILLA_POSTGRES_IMAGE"
		echo "FLOTILLA_MEMBER_IMAGE=$FLOTILLA_MEMBER_IMAGE"
		echo "FLOTILLA_TLS_DIR=$FLOTILLA_TLS_DIR"
	} >.env
}

case "${1:-}" in
up)
	shift
	images
	if [ ! -f "$FLOTILLA_TLS_DIR/apply-member-2.pem" ]; then
		bash deploy/tls.sh --readable "$FLOTILLA_TLS_DIR" member-1 member-2
	fi
	write_dotenv
	start=$(date +%s)
	echo "compose: starting the stack and waiting until every service is healthy" >&2
	$compose "${files[@]}" up -d --no-build --wait --wait-timeout "${FLOTILLA_COMPOSE_WAIT:-900}" "$@"
	echo "compose: every service healthy in $(($(date +%s) - start))s; the local members join the fleet" >&2
	$compose "${files[@]}" --profile tools run --rm -T fleetctl apply -f - <deploy/docker/local-members.yaml 2>/dev/null >&2
	$compose "${files[@]}" ps --format 'table {{.Service}}\t{{.Status}}' >&2
	cat >&2 <<USAGE

Use fleetctl through its container (it reads manifests on stdin, like kubectl; ./.env
gives plain docker compose this stack's files and images):

  $compose --profile tools run --rm -T fleetctl get members -o json
  $compose --profile tools run --rm -T fleetctl apply -f - < deploy/examples/quickstart/placement.yaml

or from the host: fleetctl --nats tls://127.0.0.1:${FLOTILLA_NATS_PORT:-4222} --nats-ca $FLOTILLA_TLS_DIR/ca.pem \\
  --nats-cert $FLOTILLA_TLS_DIR/flotilla.pem --nats-key $FLOTILLA_TLS_DIR/flotilla-key.pem get members
Stop with make compose-down (state stays in named volumes; hack/compose.sh down -v drops it).
USAGE
	;;
*)
	names
	$compose "${files[@]}" "$@"
	;;
esac
