#!/usr/bin/env bash
# scripts/generate.sh [OUTDIR] | --check
# Generates Go code for rpc/proto with protoc and the protoc-gen-go and
# protoc-gen-connect-go versions go.mod pins (scripts/setup.sh installs them
# into $BOXD_DEPS/bin). --check generates into a temporary directory and
# fails if the committed rpc/gen differs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${BOXD_DEPS:-/opt/boxd-deps}/bin:$PATH"
gen() {
	mkdir -p "$1"
	protoc -I rpc/proto \
		--go_out="$1" --go_opt=paths=source_relative \
		--connect-go_out="$1" --connect-go_opt=paths=source_relative \
		rpc/proto/boxd/v1/*.proto
}
if [[ ${1:-} == --check ]]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	gen "$tmp"
	if ! diff -r "$tmp" rpc/gen; then
		echo "rpc/gen is out of date with rpc/proto: run 'make generate' and commit" >&2
		exit 1
	fi
	echo "generated code is in sync"
else
	gen "${1:-rpc/gen}"
fi
