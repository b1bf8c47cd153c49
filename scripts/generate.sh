#!/usr/bin/env bash
# scripts/generate.sh [OUTDIR] | --check
# Generates Go code for rpc/proto with protoc and the protoc-gen-go and
# protoc-gen-connect-go versions go.mod pins (scripts/setup.sh installs them
# into $BOXD_DEPS/bin), the Python SDK's protobuf modules
# (sdk/python/boxd/v1/*_pb2.py and .pyi, with Debian's protoc), the
# TypeScript SDK's modules (sdk/typescript/src/gen, with protoc-gen-es from
# that package's devDependencies, installed by scripts/npm-modules.sh from
# its committed lockfile), and the API reference docs/api.md from the proto
# comments with scripts/apidoc. --check generates all four into a temporary
# directory and fails if the committed rpc/gen, Python or TypeScript modules
# or docs/api.md differ.
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
# gen_python OUTDIR writes OUTDIR/boxd/v1/*_pb2.py{,i}: the proto package
# boxd.v1 becomes the SDK's subpackage boxd.v1, so the generated imports
# (from boxd.v1 import boxd_pb2) resolve inside the SDK.
gen_python() {
	mkdir -p "$1"
	protoc -I rpc/proto --python_out="$1" --pyi_out="$1" rpc/proto/boxd/v1/*.proto
}
PYGEN=sdk/python
# gen_ts OUTDIR writes OUTDIR/boxd/v1/*_pb.ts (messages and service
# descriptors; connect-es needs no separate service generator in v2).
TSDIR=sdk/typescript
gen_ts() {
	local mods
	mods=$(bash scripts/npm-modules.sh "$TSDIR")
	mkdir -p "$1"
	protoc -I rpc/proto --plugin=protoc-gen-es="$mods/.bin/protoc-gen-es" \
		--es_out="$1" --es_opt=target=ts,import_extension=js rpc/proto/boxd/v1/*.proto
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
	gen "$tmp/go"
	# rpc/gen's go.mod and go.sum are written by hand: it is a module of its own.
	if ! diff -r -x go.mod -x go.sum "$tmp/go" rpc/gen; then
		echo "rpc/gen is out of date with rpc/proto: run 'make generate' and commit" >&2
		exit 1
	fi
	gen_python "$tmp/py"
	for f in "$tmp"/py/boxd/v1/*; do
		if ! diff "$f" "$PYGEN/boxd/v1/${f##*/}"; then
			echo "$PYGEN/boxd/v1 is out of date with rpc/proto: run 'make generate' and commit" >&2
			exit 1
		fi
	done
	# A generated module whose proto is gone.
	for f in "$PYGEN"/boxd/v1/*_pb2.py "$PYGEN"/boxd/v1/*_pb2.pyi; do
		[[ -e $tmp/py/boxd/v1/${f##*/} ]] || { echo "$f has no proto in rpc/proto: remove it" >&2; exit 1; }
	done
	gen_ts "$tmp/ts"
	if ! diff -r "$tmp/ts" "$TSDIR/src/gen"; then
		echo "$TSDIR/src/gen is out of date with rpc/proto: run 'make generate' and commit" >&2
		exit 1
	fi
	apidoc "$tmp/api.md"
	if ! diff -u docs/api.md "$tmp/api.md"; then
		echo "docs/api.md is out of date with rpc/proto: run 'make generate' and commit" >&2
		exit 1
	fi
	echo "generated code and docs/api.md are in sync"
else
	gen "${1:-rpc/gen}"
	# Regenerating the committed rpc/gen also rewrites the Python and
	# TypeScript SDKs' modules and the API reference; another OUTDIR (a scratch copy) leaves
	# them alone.
	if [[ ${1:-rpc/gen} == rpc/gen ]]; then
		gen_python "$PYGEN"
		rm -rf "$TSDIR/src/gen"
		gen_ts "$TSDIR/src/gen"
		apidoc docs/api.md
	fi
fi
