# shellcheck shell=bash
# scripts/lib.sh: helpers shared by scripts/setup.sh and scripts/containerd.sh.
# Source it; it defines variables and functions only.

BOXD_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BOXD_DEPS=${BOXD_DEPS:-/opt/boxd-deps}

# The runc every sandbox runs on (boxd's default --runc is
# $BOXD_DEPS/runc-$RUNC_VERSION/runc; package runc's Pinned must match, a
# unit test checks). Not older than the newest release fixing a known
# container escape: see docs/runtimes.md, "runc".
RUNC_VERSION=v1.5.2

# gVisor's runsc and its containerd shim (containerd-shim-runsc-v1), which
# `boxctl create --runtime gvisor` sandboxes run on: built by
# scripts/setup.sh into $BOXD_DEPS/gvisor-$GVISOR_VERSION/. gVisor tags no
# module versions; this is the newest commit of its Go branch the module
# proxy served (`go list -m gvisor.dev/gvisor@latest`). Package gvisor's
# Pinned must match, a unit test checks.
GVISOR_VERSION=v0.0.0-20260905035102-160fafc42237

die() {
	echo "${0##*/}: error: $*" >&2
	exit 1
}

# boxd_go makes sure a Go toolchain is on PATH.
boxd_go() {
	if ! command -v go >/dev/null 2>&1; then
		if [[ -x /usr/local/go/bin/go ]]; then
			PATH=/usr/local/go/bin:$PATH
			export PATH
		else
			die "go not found on PATH or in /usr/local/go/bin: install Go (the version in go.mod) first"
		fi
	fi
}

# boxd_versions sets CONTAINERD_VERSION, PROTOBUF_VERSION and CONNECT_VERSION
# to the versions go.mod pins (as `go list -m` resolves them, replace
# directives included). If go.mod cannot be loaded (someone is editing it),
# falls back to reading the require lines directly.
boxd_versions() {
	local out mod ver
	out=$(cd "$BOXD_REPO" && go list -m -f '{{.Path}} {{.Version}}' \
		github.com/containerd/containerd/v2 google.golang.org/protobuf connectrpc.com/connect 2>/dev/null) ||
		out=$(awk '$1 == "require" && NF >= 3 { print $2, $3; next }
			/^require[ \t]*\(/ { r = 1; next }
			r && /^\)/ { r = 0; next }
			r && NF >= 2 { print $1, $2 }' "$BOXD_REPO/go.mod")
	# shellcheck disable=SC2034 # used by the scripts that source this file
	CONTAINERD_VERSION="" PROTOBUF_VERSION="" CONNECT_VERSION=""
	# shellcheck disable=SC2034
	while read -r mod ver; do
		case $mod in
		github.com/containerd/containerd/v2) CONTAINERD_VERSION=$ver ;;
		google.golang.org/protobuf) PROTOBUF_VERSION=$ver ;;
		connectrpc.com/connect) CONNECT_VERSION=$ver ;;
		esac
	done <<<"$out"
	[[ -n $CONTAINERD_VERSION ]] || die "github.com/containerd/containerd/v2 is not in $BOXD_REPO/go.mod"
}

# boxd_containerd_bindir prints the directory holding the pinned containerd,
# containerd-shim-runc-v2 and ctr (CONTAINERD_BIN_DIR overrides it).
boxd_containerd_bindir() {
	if [[ -n ${CONTAINERD_BIN_DIR:-} ]]; then
		echo "$CONTAINERD_BIN_DIR"
		return
	fi
	[[ -n ${CONTAINERD_VERSION:-} ]] || boxd_versions
	echo "$BOXD_DEPS/containerd-$CONTAINERD_VERSION/bin"
}
