#!/usr/bin/env bash
# Makes `docker compose` (v2) work on a machine whose Docker CLI has no compose plugin (Debian
# ships docker-compose v1): builds the v2 CLI plugin from its Go module (through the Go module
# proxy) into a cache outside the repository, once, and installs it as the user's CLI plugin
# (~/.docker/cli-plugins/docker-compose). Does nothing when `docker compose` already answers.
# Prints the command to run compose with on stdout ("docker compose").
#
# github.com/docker/compose/v2 cannot be `go install`ed (its go.mod has exclude directives): a
# throwaway wrapper module requires it and repeats them.
set -euo pipefail

COMPOSE_VERSION=${COMPOSE_VERSION:-v2.40.3}
CACHE=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
BIN="$CACHE/bin/docker-compose-$COMPOSE_VERSION"
PLUGIN_DIR=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins

log() { echo "compose-v2: $*" >&2; }

if docker compose version >/dev/null 2>&1; then
	echo "docker compose"
	exit 0
fi
if [ ! -x "$BIN" ]; then
	log "docker compose (v2) is missing: building the plugin $COMPOSE_VERSION from its Go module (3-6 minutes on 2 cores, once)"
	start=$(date +%s)
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$(dirname "$BIN")"
	(
		cd "$work"
		export GOWORK=off GOFLAGS=-mod=mod
		go mod init flotilla.local/compose-build >/dev/null 2>&1
		gomod=$(go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
		[ -f "$gomod" ] || { log "cannot download github.com/docker/compose/v2@$COMPOSE_VERSION"; exit 1; }
		sed -n '/^exclude (/,/^)/p' "$gomod" >>go.mod
		go get "github.com/docker/compose/v2@$COMPOSE_VERSION" >&2
		CGO_ENABLED=0 go build -trimpath \
			-ldflags="-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
			-o "$BIN.tmp" github.com/docker/compose/v2/cmd >&2
	)
	mv "$BIN.tmp" "$BIN"
	log "built in $(($(date +%s) - start))s into $BIN"
fi
mkdir -p "$PLUGIN_DIR"
ln -sf "$BIN" "$PLUGIN_DIR/docker-compose"
docker compose version >/dev/null || { log "installed $PLUGIN_DIR/docker-compose but docker compose still fails"; exit 1; }
log "installed $PLUGIN_DIR/docker-compose ($COMPOSE_VERSION)"
echo "docker compose"
