#!/usr/bin/env bash
# scripts/test.sh: runs every Go test (unit and integration) verbosely and
# fails if any test skipped: in CI an integration test that cannot find its
# real component must fail, never skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# The e2e package alone runs about 19 minutes on 2 cores.
go test -count=1 -timeout 35m -v ./... 2>&1 | tee "$log" || status=$?
# bench/ is a module of its own (its plotting stays out of boxd's graph);
# so is rpc/apiwire. The Go SDK (sdk/go/boxd), a module too, needs a
# daemon: e2e TestSDKGo runs its tests against the test boxd.
for mod in bench rpc/apiwire; do
	go test -C "$mod" -count=1 -timeout 5m -v ./... 2>&1 | tee -a "$log" || status=$?
done
skipped=$(grep -E -- '^\s*--- SKIP|^SKIP integration' "$log" || true)
passed=$(grep -cE -- '^\s*--- PASS' "$log" || true)
failed=$(grep -cE -- '^\s*--- FAIL' "$log" || true)
if [[ -n $skipped ]]; then
	echo "tests were skipped; every test must run here:" >&2
	echo "$skipped" >&2
	status=1
fi
echo "$passed passed, $failed failed"
# Every fuzz target for a few seconds (scripts/fuzz.sh; about 2 min).
bash scripts/fuzz.sh || status=1
exit "$status"
