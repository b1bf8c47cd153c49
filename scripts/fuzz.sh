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
# Minimizing an input with new coverage may take go's default of 60 s, far
# past a 4 s budget; a crash is kept unminimized all the same.
minimize=${FUZZMINIMIZETIME:-1s}

# deadline_race reports whether a failed run's output is only Go 1.26's
# fuzz coordinator race at the end of -fuzztime (go.dev/issue/75804, fixed
# in Go 1.27): a bare "context deadline exceeded" with no failing input
# written, no panic and no test failure of the target's own. Such a run is
# repeated once; anything else fails at once.
deadline_race() {
	grep -q '^    context deadline exceeded$' <<<"$1" &&
		! grep -qE 'Failing input written|^panic:|_test\.go:[0-9]+:' <<<"$1"
}

fuzz_one() { # PKG NAME
	go test -run '^$' -fuzz "^${2}\$" -fuzztime "$budget" -fuzzminimizetime "$minimize" "$1" 2>&1
}

# targets prints FILE:FuzzName for every fuzz target.
targets() {
	git ls-files '*_test.go' | xargs grep -oE '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' | sed -E 's/\(f \*testing\.F\)$//; s/:func /:/' | sort
}
status=0
n=0
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	n=$((n + 1))
	rc=0
	out=$(fuzz_one "$pkg" "$name") || rc=$?
	if ((rc != 0)) && deadline_race "$out"; then
		echo "fuzz: $pkg $name hit Go's fuzztime deadline race (go.dev/issue/75804); running it again" >&2
		rc=0
		out=$(fuzz_one "$pkg" "$name") || rc=$?
	fi
	if ((rc != 0)); then
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
