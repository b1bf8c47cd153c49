#!/usr/bin/env bash
# scripts/fuzz.sh [FUZZTIME]: runs every Go fuzz target in the repository
# for a short budget each (default 4s; `make test` runs it, so the whole
# pass stays around two minutes on 2 cores). Targets are found by name
# (`func FuzzX(f *testing.F)` in a _test.go file), so a new target is
# fuzzed without being listed here. Each target's committed corpus
# (testdata/fuzz/FuzzX/) is replayed by the plain `go test` run as well;
# a failure here writes the crashing input there, to be committed with the
# fix.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
budget=${1:-${FUZZTIME:-4s}}
status=0
n=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	n=$((n + 1))
	if ! out=$(go test -run '^$' -fuzz "^${name}\$" -fuzztime "$budget" "$pkg" 2>&1); then
		echo "FUZZ FAIL $pkg $name" >&2
		echo "$out" | tail -30 >&2
		status=1
	else
		echo "fuzz ok: $pkg $name ($budget)"
	fi
done < <(git ls-files '*_test.go' | xargs grep -oE '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' | sed -E 's/\(f \*testing\.F\)$//; s/:func /:/' | sort)
echo "$n fuzz targets run for $budget each"
exit "$status"
