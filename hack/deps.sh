#!/usr/bin/env bash
# Installs what Flotilla's tests and quick start need on a Debian machine with Go:
# PostgreSQL server binaries (initdb, pg_ctl, postgres) and, where a Docker engine answers,
# debootstrap (make images builds the PostgreSQL image from Debian's packages with it).
# Nothing else is fetched from outside the Go module proxy and Debian's packages.
set -euo pipefail

have_postgres() {
	command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
have_debootstrap() {
	command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ]
}

packages=()
if [ -z "${FLOTILLA_TEST_DATABASE_URL:-}" ] && ! have_postgres; then
	echo "deps: PostgreSQL server binaries not found; installing Debian's postgresql package" >&2
	packages+=(postgresql)
fi
if docker info >/dev/null 2>&1 && ! have_debootstrap; then
	echo "deps: a Docker engine answers and debootstrap is missing; installing it (make images needs it)" >&2
	packages+=(debootstrap)
fi
((${#packages[@]})) || exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo="sudo"; else
	echo "deps: need root (or sudo) to run: apt-get install -y ${packages[*]}" >&2
	echo "deps: or point the tests at a server with FLOTILLA_TEST_DATABASE_URL=postgres://..." >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
if [ -z "${FLOTILLA_TEST_DATABASE_URL:-}" ]; then
	have_postgres || { echo "deps: postgresql installed but initdb still not found" >&2; exit 1; }
fi
echo "deps: installed ${packages[*]}" >&2
