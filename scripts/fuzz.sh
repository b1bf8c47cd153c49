#!/usr/bin/env bash
# scripts/fuzz.sh [FUZZTIME]: runs every Go fuzz target in the repository
# for a short budget each (default 4s; `make test` runs it, so the whole
# pass stays around two minutes on 2 cores). Targets are found by name
# (`func FuzzX(f *testing.F)` in a _test.go file), so a new target is
# fuzzed without being listed here. Each target's committed corpus
# (testdata/fuzz/FuzzX/) is replayed by the plain `go test` run as well;
# a failure here writes the crashing input there, to be committed with the
# fix.
#
# The committed corpus also holds what the fuzzer generated: the inputs it
# found new coverage with, kept in Go's cache. `scripts/fuzz.sh --save
# [FUZZTIME]` fuzzes (say 60s each) and then copies those inputs into each
# target's testdata/fuzz/FuzzX/, for review and commit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
save=0
if [[ ${1:-} == --save ]]; then
	save=1
	shift
fi
budget=${1:-${FUZZTIME:-4s}}

# targets prints FILE:FuzzName for every fuzz target.
targets() {
	git ls-files '*_test.go' | xargs grep -oE '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' | sed -E 's/\(f \*testing\.F\)$//; s/:func /:/' | sort
}
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
done < <(targets)
echo "$n fuzz targets run for $budget each"
if ((save)); then
	module=$(go list -m)
	cache=$(go env GOCACHE)/fuzz/$module
	while IFS=: read -r file name; do
		dir=$(dirname "$file")
		[[ -d $cache/$dir/$name ]] || continue
		mkdir -p "$dir/testdata/fuzz/$name"
		cp -n "$cache/$dir/$name"/* "$dir/testdata/fuzz/$name/"
		echo "corpus: $dir/testdata/fuzz/$name: $(ls "$dir/testdata/fuzz/$name" | wc -l) inputs"
	done < <(targets)
fi
exit "$status"
