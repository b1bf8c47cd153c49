#!/usr/bin/env bash
# scripts/generate.sh [OUTDIR] | --check
# Generates Go code for rpc/proto with protoc and the protoc-gen-go and
# protoc-gen-connect-go versions go.mod pins (scripts/setup.sh installs them
# into $BOXD_DEPS/bin), and the API reference docs/api.md from the proto
# comments with scripts/apidoc. --check generates both into a temporary
# directory and fails if the committed rpc/gen or docs/api.md differs.
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
# apidoc DOCFILE: the reference, from the descriptors with their comments.
apidoc() {
	local pb
	pb=$(mktemp)
	protoc -I rpc/proto --include_source_info --include_imports \
		--descriptor_set_out="$pb" rpc/proto/boxd/v1/*.proto
	mkdir -p "$(dirname "$1")"
	go run ./scripts/apidoc "$pb" >"$1.tmp" || { rm -f "$pb" "$1.tmp"; return 1; }
	rm -f "$pb"
	mv "$1.tmp" "$1"
}
if [[ ${1:-} == --check ]]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	gen "$tmp/gen"
	apidoc "$tmp/api.md"
	if ! diff -r "$tmp/gen" rpc/gen; then
		echo "rpc/gen is out of date with rpc/proto: run 'make generate' and commit" >&2
		exit 1
	fi
	if ! diff -u docs/api.md "$tmp/api.md"; then
		echo "docs/api.md is out of date with rpc/proto: run 'make generate' and commit" >&2
		exit 1
	fi
	echo "generated code and docs/api.md are in sync"
else
	gen "${1:-rpc/gen}"
	apidoc docs/api.md
fi
