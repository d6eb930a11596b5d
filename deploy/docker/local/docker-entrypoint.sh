#!/bin/sh
# The entrypoint of the PostgreSQL image hack/images.sh builds from Debian's packages: what
# the official image's entrypoint does that Flotilla's compose file and tests rely on. Run as
# root with "postgres ARGS...", it makes PGDATA on the first start (POSTGRES_USER, default
# postgres; POSTGRES_PASSWORD or POSTGRES_HOST_AUTH_METHOD=trust; POSTGRES_DB, default the
# user), through a server on the Unix socket only, then runs the server as user postgres.
set -eu

PGDATA=${PGDATA:-/var/lib/postgresql/data}
export PGDATA
if [ "${1:-}" != "postgres" ] && [ "${1#-}" = "${1:-}" ]; then
	exec "$@"
fi
[ "${1:-}" = "postgres" ] && shift

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chmod 0700 "$PGDATA"
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" postgres "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	user=${POSTGRES_USER:-postgres}
	db=${POSTGRES_DB:-$user}
	auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
		echo "docker-entrypoint: set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust" >&2
		exit 1
	fi
	pwfile=$(mktemp)
	printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
	initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" \
		--encoding=UTF8 --locale=C.UTF-8 >/dev/null
	rm -f "$pwfile"
	echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start
	if [ "$db" != postgres ]; then
		psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d postgres -q \
			-c "CREATE DATABASE \"$db\""
	fi
	pg_ctl -D "$PGDATA" -m fast -w stop
	echo "docker-entrypoint: PostgreSQL init process complete; ready for start up."
fi
exec postgres -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
