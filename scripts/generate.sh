#!/usr/bin/env bash
# scripts/generate.sh [OUTDIR] | --check
# Generates Go code for rpc/proto with protoc and the protoc-gen-go and
# protoc-gen-connect-go versions go.mod pins (scripts/setup.sh installs them
# into $BOXD_DEPS/bin), and the Python SDK's protobuf modules
# (sdk/python/boxd/v1/*_pb2.py and .pyi, with Debian's protoc). --check
# generates into a temporary directory and fails if the committed rpc/gen or
# Python modules differ.
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
if [[ ${1:-} == --check ]]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	gen "$tmp/go"
	if ! diff -r "$tmp/go" rpc/gen; then
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
	echo "generated code is in sync"
else
	gen "${1:-rpc/gen}"
	# Regenerating the committed rpc/gen also rewrites the Python SDK's
	# modules; another OUTDIR (a scratch copy) leaves them alone.
	if [[ ${1:-rpc/gen} == rpc/gen ]]; then gen_python "$PYGEN"; fi
fi
