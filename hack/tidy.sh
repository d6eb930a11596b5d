#!/usr/bin/env bash
# Runs `go mod tidy` in every module. Each module requires the workspace
# modules it imports at v0.0.0 with a replace to their directory, so a module
# also builds on its own (GOWORK=off, e.g. in a Dockerfile).
set -euo pipefail
cd "$(dirname "$0")/.."
M=github.com/flotilla-dev/flotilla
mods=$(go work edit -json | sed -n 's/.*"DiskPath": "\.\/\(.*\)".*/\1/p')
for d in $mods; do
	rel=$(realpath --relative-to="$d" .)
	args=()
	for o in $mods; do
		[ "$o" = "$d" ] && continue
		# Replaces count only in the main module, so every module replaces
		# every workspace module (its imports' imports may need one).
		args+=(-replace="$M/$o=$rel/$o")
		if grep -rqs --include='*.go' "\"$M/$o[\"/]" "$d"; then
			args+=(-require="$M/$o@v0.0.0")
		fi
	done
	(cd "$d" && go mod edit "${args[@]}" && GOWORK=off go mod tidy -e)
	echo "tidy: $d"
done
