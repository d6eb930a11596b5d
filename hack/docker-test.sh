#!/usr/bin/env bash
# Runs a command (make test's go test) with what the Docker engine must provide first:
#   - where an engine answers, the compose v2 plugin and every image (hack/compose-v2.sh,
#     hack/images.sh), so that e2e/compose and harness/containers run, with no registry;
#   - with FLOTILLA_USE_DOCKER=1, the integration suites' PostgreSQL as a container of the local
#     image (FLOTILLA_TEST_DATABASE_URL; harness/postgres clones a database per test there),
#     removed when the command ends. NATS stays harness/natsserver's embedded server: the
#     suites stop and restart it in-process.
# Without an engine it only runs the command (e2e/compose and harness/containers then skip, or
# fail with CI=true).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! docker info >/dev/null 2>&1; then
	if [ "${FLOTILLA_USE_DOCKER:-}" = 1 ]; then
		echo "docker-test: FLOTILLA_USE_DOCKER=1 but no Docker engine answers (docker info)" >&2
		exit 1
	fi
	exec "$@"
fi
bash hack/compose-v2.sh >/dev/null
eval "$(bash hack/images.sh)"
export FLOTILLA_NATS_IMAGE FLOTILLA_POSTGRES_IMAGE FLOTILLA_MEMBER_IMAGE
# hack/compose.sh need not check the images again in this run.
export FLOTILLA_IMAGES_BUILT=1

if [ "${FLOTILLA_USE_DOCKER:-}" = 1 ] && [ -z "${FLOTILLA_TEST_DATABASE_URL:-}" ]; then
	id=$(docker run -d --rm -p 127.0.0.1::5432 -e POSTGRES_HOST_AUTH_METHOD=trust --tmpfs /var/lib/postgresql/data \
		"$FLOTILLA_POSTGRES_IMAGE" postgres -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=500)
	trap 'docker rm -f "$id" >/dev/null' EXIT
	port=$(docker port "$id" 5432/tcp | head -1 | sed 's/.*://')
	for _ in $(seq 120); do
		docker exec "$id" pg_isready -h 127.0.0.1 -U postgres -q 2>/dev/null && break
		sleep 1
	done
	docker exec "$id" pg_isready -h 127.0.0.1 -U postgres -q || { docker logs "$id" >&2; exit 1; }
	export FLOTILLA_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	echo "docker-test: the integration suites use PostgreSQL in container ${id:0:12} ($FLOTILLA_POSTGRES_IMAGE) at 127.0.0.1:$port" >&2
fi
"$@"
