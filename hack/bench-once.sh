#!/usr/bin/env bash
# Runs every Go benchmark of the given modules once (make test), so that a benchmark that no
# longer runs fails CI rather than make bench. Only the packages that hold benchmarks are
# run: with -bench, go test runs its packages one after another.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Benchmark' "$@" | xargs -r -n1 dirname | sort -u | sed 's|^|./|')
if [ "${#pkgs[@]}" -eq 0 ]; then
	exit 0
fi
start=$SECONDS
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! go test -run '^$' -bench . -benchtime 1x "${pkgs[@]}" >"$log" 2>&1; then
	grep -v '^\s*\(time=\|testing.go:\)' "$log" | tail -60
	echo "bench-once: a benchmark failed (the whole output: go test -run '^\$' -bench . -benchtime 1x ${pkgs[*]})" >&2
	exit 1
fi
echo "benchmarks: each of $(grep -c '^Benchmark' "$log") run once in ${#pkgs[@]} packages, $((SECONDS - start))s"
