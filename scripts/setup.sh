#!/usr/bin/env bash
# scripts/setup.sh: install what boxd's development and integration tests need.
#
# Idempotent and fast (well under 2 s) when everything is present; on a fresh
# Debian (bookworm) machine, as root, it installs:
#   - apt packages: busybox-static, debootstrap, protobuf-compiler,
#     containernetworking-plugins (the CNI plugins of --network egress),
#     python3-grpcio and python3-protobuf (the Python SDK's tests),
#     nodejs and npm (the e2e test of `boxctl mcp` with the TypeScript MCP
#     SDK's client, and the TypeScript SDK's build, code generation and
#     tests, whose npm packages scripts/npm-modules.sh installs from the
#     committed lockfile; a nodejs that ships npm itself needs no npm
#     package), e2fsprogs (mkfs.ext4 formats the image of a disk-capped
#     sandbox), docker-registry (the registry e2e TestRegistry and the
#     pull bench run their own on loopback; the package's own service is
#     stopped and disabled right after install, only the binary is used),
#     libseccomp-dev (to build runc with seccomp), curl and jq (the
#     docs' curl example, which e2e TestDocs runs), mmdebstrap (builds
#     the Debian image below), and python3-docker (docker-py, which e2e
#     TestDockerPy points at boxd's Docker endpoint)
#     (apt-get update runs only if one of them is missing);
#   - containerd, containerd-shim-runc-v2 and ctr at the version go.mod pins
#     for github.com/containerd/containerd/v2, built with `go install` into
#     $BOXD_DEPS/containerd-$VERSION/bin (about 3 min the first time);
#   - runc at the version scripts/lib.sh pins (RUNC_VERSION), built with
#     `go install` (cgo, Debian's libseccomp-dev) into
#     $BOXD_DEPS/runc-$VERSION/runc: the runc every sandbox runs on;
#   - gVisor's runsc and containerd-shim-runsc-v1 at the version
#     scripts/lib.sh pins (GVISOR_VERSION), built with `go install` into
#     $BOXD_DEPS/gvisor-$VERSION/ (`create --runtime gvisor`; about 8 min on
#     2 cores the first time);
#   - the Debian image of the code interpreter (images/debian/archive.sh:
#     bookworm with python3, ipykernel, jupyter_client, matplotlib), as a
#     docker-archive tar at $BOXD_DEPS/images/debian-KEY.tar, KEY the
#     recipe's hash (built once, a few minutes; the e2e tests import it);
#   - the docker client of Debian's docker.io, fetched with apt-get download
#     and unpacked with dpkg-deb -x into $BOXD_DEPS/docker-cli (nothing of
#     the package is installed: no dockerd, containerd or iptables rules);
#   - kube-apiserver, kubectl (built from scripts/k8s-tools) and etcd
#     (Debian's etcd-server, unpacked) into $BOXD_DEPS/k8s-KEY/ by
#     scripts/k8s-bins.sh, for the fleet's tests (about 8 minutes the
#     first time);
#   - protoc-gen-go and protoc-gen-connect-go, at the versions go.mod pins for
#     google.golang.org/protobuf and connectrpc.com/connect, into $BOXD_DEPS/bin.
# BOXD_DEPS defaults to /opt/boxd-deps.
#
# On success it prints one NAME=PATH line per tool it found (plus
# containerd-version=VERSION). With --check it installs nothing and exits 1 if
# something is missing (the Go test harness uses it to decide whether to run
# the full setup).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CHECK_ONLY=false
case ${1:-} in
"") ;;
--check) CHECK_ONLY=true ;;
*) die "usage: $0 [--check]" ;;
esac

missing=()
need() { missing+=("$1"); }

# ---- apt packages -----------------------------------------------------------
APT_PACKAGES=(busybox-static debootstrap protobuf-compiler containernetworking-plugins python3-grpcio python3-protobuf nodejs e2fsprogs docker-registry libseccomp-dev curl jq mmdebstrap python3-docker)
# Files each package must provide (busybox-static: the static binary; the
# dynamically linked "busybox" package also provides /bin/busybox).
declare -A APT_FILE=(
	[busybox-static]=/bin/busybox
	[debootstrap]=/usr/sbin/debootstrap
	[protobuf-compiler]=/usr/bin/protoc
	[containernetworking-plugins]=/usr/lib/cni/bridge
	[python3-grpcio]=/usr/lib/python3/dist-packages/grpc/__init__.py
	[python3-docker]=/usr/lib/python3/dist-packages/docker/__init__.py
	[python3-protobuf]=/usr/lib/python3/dist-packages/google/protobuf/__init__.py
	[nodejs]=/usr/bin/node
	[e2fsprogs]=/sbin/mkfs.ext4
	[docker-registry]=/usr/bin/docker-registry
	[libseccomp-dev]=/usr/include/seccomp.h
	[curl]=/usr/bin/curl
	[jq]=/usr/bin/jq
	[mmdebstrap]=/usr/bin/mmdebstrap
)
apt_missing() {
	local status pkg
	status=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${APT_PACKAGES[@]}" 2>/dev/null || true)
	for pkg in "${APT_PACKAGES[@]}"; do
		if ! grep -qx "$pkg installed" <<<"$status" || [[ ! -e ${APT_FILE[$pkg]} ]]; then
			echo "$pkg"
		fi
	done
	[[ -x /usr/bin/npm ]] || echo npm
}
mapfile -t apt_todo < <(apt_missing)
if ((${#apt_todo[@]})); then
	if $CHECK_ONLY; then
		need "apt packages: ${apt_todo[*]}"
	else
		[[ $(id -u) -eq 0 ]] || die "apt packages missing (${apt_todo[*]}) and not root: run 'sudo $0'"
		echo "setup: installing ${apt_todo[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >&2 || die "apt-get update failed"
		apt-get install -y -qq --no-install-recommends "${apt_todo[@]}" >&2 ||
			die "apt-get install ${apt_todo[*]} failed"
		# The package starts a registry on :5000 for the whole host where
		# systemd runs; the tests run their own, so it goes again.
		if [[ " ${apt_todo[*]} " == *" docker-registry "* ]] && command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
			systemctl disable --now docker-registry.service >&2 || true
		fi
		mapfile -t apt_todo < <(apt_missing)
		((${#apt_todo[@]} == 0)) || die "still missing after apt-get install: ${apt_todo[*]}"
	fi
fi

# ---- pinned versions ----------------------------------------------------------
boxd_go
boxd_versions
[[ -n $PROTOBUF_VERSION ]] || die "google.golang.org/protobuf is not in go.mod"
[[ -n $CONNECT_VERSION ]] || die "connectrpc.com/connect is not in go.mod"

CTRD_BIN=$(boxd_containerd_bindir)
CTRD_TOOLS=(containerd containerd-shim-runc-v2 ctr)

ctrd_present() {
	local t
	for t in "${CTRD_TOOLS[@]}"; do
		[[ -x $CTRD_BIN/$t ]] || return 1
	done
}

# other_build_running reports whether some process (another setup.sh, or a
# hand-started `go install`) is building this containerd version right now.
# The bracket keeps the pattern from matching grep's own command line.
other_build_running() {
	grep -laE "cmd/containerd[@]$CONTAINERD_VERSION" /proc/[0-9]*/cmdline >/dev/null 2>&1
}

build_containerd() {
	local dir tmp log waited=0
	dir=$(dirname "$CTRD_BIN")
	mkdir -p "$dir" || die "cannot create $dir (run as root, or set BOXD_DEPS to a writable directory)"
	# Serialize builds between concurrent setup.sh runs.
	exec 9>"$dir/.build.lock"
	flock -w 1800 9 || die "timed out waiting for another setup.sh building containerd $CONTAINERD_VERSION"
	# A build not started by this script (no lock) may be filling $CTRD_BIN:
	# wait for it rather than racing it.
	while ! ctrd_present && other_build_running; do
		((waited % 30 == 0)) && echo "setup: waiting for another build of containerd $CONTAINERD_VERSION..." >&2
		sleep 2
		waited=$((waited + 2))
		((waited < 1800)) || die "timed out waiting for another containerd build"
	done
	if ctrd_present; then
		flock -u 9
		return
	fi
	tmp="$dir/bin.tmp.$$"
	log="$dir/build.log"
	rm -rf "$tmp"
	echo "setup: building containerd $CONTAINERD_VERSION into $CTRD_BIN (a few minutes the first time; log: $log)" >&2
	if ! (cd / && GOFLAGS='' CGO_ENABLED=0 GOBIN=$tmp go install -tags no_btrfs \
		"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
		"github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION") >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		rm -rf "$tmp"
		die "building containerd $CONTAINERD_VERSION failed (log: $log)"
	fi
	# Replace a partial directory atomically enough: readers check all three.
	rm -rf "$CTRD_BIN"
	mv "$tmp" "$CTRD_BIN"
	flock -u 9
	ctrd_present || die "containerd build finished but $CTRD_BIN is incomplete"
}

if ! ctrd_present; then
	if $CHECK_ONLY; then
		need "containerd $CONTAINERD_VERSION in $CTRD_BIN"
	else
		build_containerd
	fi
fi

# ---- runc ---------------------------------------------------------------------
# The pinned runc, built with cgo against Debian's libseccomp (the seccomp
# build tag: without it runc cannot load a seccomp profile). `go install`
# leaves runc's version string unset, so it is passed as the Makefile would.
RUNC_DIR=$BOXD_DEPS/runc-$RUNC_VERSION
RUNC_BIN=$RUNC_DIR/runc
runc_ok() {
	local out
	[[ -x $RUNC_BIN ]] || return 1
	out=$("$RUNC_BIN" --version 2>/dev/null) || return 1
	[[ $out == "runc version ${RUNC_VERSION#v}"$'\n'* ]] && [[ $out == *libseccomp:* ]]
}
# build_once NAME DIR CHECK STEPS FAILED: under DIR's build lock (another
# setup.sh may be building the same), unless CHECK passes by then, runs
# STEPS TMP LOG (a function that builds into the fresh directory TMP and
# moves the results in place; its output goes to LOG) and then requires
# CHECK, else stops with FAILED.
build_once() {
	local name=$1 dir=$2 check=$3 steps=$4 failed=$5 tmp log lock
	mkdir -p "$dir" || die "cannot create $dir (run as root, or set BOXD_DEPS to a writable directory)"
	exec {lock}>"$dir/.build.lock"
	flock -w 1800 "$lock" || die "timed out waiting for another setup.sh building $name"
	if ! "$check"; then
		tmp=$dir/bin.tmp.$$
		log=$dir/build.log
		rm -rf "$tmp"
		mkdir -p "$tmp"
		: >"$log"
		if ! "$steps" "$tmp" "$log"; then
			tail -n 40 "$log" >&2
			rm -rf "$tmp"
			die "building $name failed (log: $log)"
		fi
		rm -rf "$tmp"
	fi
	exec {lock}>&-
	"$check" || die "$failed"
}
runc_steps() { # TMP LOG
	echo "setup: building runc $RUNC_VERSION into $RUNC_DIR (about a minute; log: $2)" >&2
	(cd / && GOFLAGS='' CGO_ENABLED=1 GOBIN=$1 go install -tags seccomp \
		-ldflags "-X main.version=${RUNC_VERSION#v}" \
		"github.com/opencontainers/runc@$RUNC_VERSION") >"$2" 2>&1 &&
		mv -f "$1/runc" "$RUNC_BIN"
}
build_runc() {
	build_once "runc $RUNC_VERSION" "$RUNC_DIR" runc_ok runc_steps \
		"$RUNC_BIN does not report version $RUNC_VERSION with libseccomp"
}
if ! runc_ok; then
	if $CHECK_ONLY; then
		need "runc $RUNC_VERSION in $RUNC_DIR"
	else
		build_runc
	fi
fi

# ---- gVisor -------------------------------------------------------------------
# runsc and containerd-shim-runsc-v1 at GVISOR_VERSION, pure Go (no cgo).
# runsc's version string is set as gVisor's own build sets it.
#
# One line of the shim is replaced before it is built (from a copy of the
# module's source; the module cache stays untouched, and go's -overlay may
# not replace files in it): gVisor's shim sets its own oom_score_adj to
# -999, below containerd's. Lowering a score below the minimum a process
# inherited needs CAP_SYS_RESOURCE, which a host (or a container boxd runs
# in) may not give even to root; the shim's write then fails and so does
# every create ("failed to set OOM Score on shim: permission denied").
# containerd's own runc shim stopped doing this in 2019 (containerd PR
# 3380): it sets its score to containerd's + 1, so that under memory
# pressure a shim dies before the daemon that manages it. The replacement
# calls that same containerd function (shim.AdjustOOMScore). It lowers
# nothing and needs no capability. See docs/gvisor.md, "The shim".
GVISOR_DIR=$BOXD_DEPS/gvisor-$GVISOR_VERSION
RUNSC_BIN=$GVISOR_DIR/runsc
RUNSC_SHIM=$GVISOR_DIR/containerd-shim-runsc-v1
gvisor_ok() {
	[[ -x $RUNSC_BIN && -x $RUNSC_SHIM && -f $GVISOR_DIR/.oom-patched ]] || return 1
	[[ $("$RUNSC_BIN" --version 2>/dev/null | head -n 1) == "runsc version $GVISOR_VERSION" ]]
}
gvisor_steps() { # TMP LOG
	local tmp=$1 log=$2 src mgr
	echo "setup: building gVisor runsc and containerd-shim-runsc-v1 $GVISOR_VERSION into $GVISOR_DIR (about 4 minutes on 2 idle cores the first time; log: $log)" >&2
	(cd / && GOFLAGS='' CGO_ENABLED=0 GOBIN=$tmp go install \
		-ldflags "-X gvisor.dev/gvisor/runsc/version.version=$GVISOR_VERSION" \
		"gvisor.dev/gvisor/runsc@$GVISOR_VERSION") >>"$log" 2>&1 || return 1
	src=$(cd / && GOFLAGS='' go mod download -json "gvisor.dev/gvisor@$GVISOR_VERSION" 2>>"$log" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || true
	[[ -n $src && -f $src/pkg/shim/v1/manager.go ]] || die "go mod download gvisor.dev/gvisor@$GVISOR_VERSION failed (log: $log)"
	cp -r "$src" "$tmp/src"
	chmod -R u+w "$tmp/src"
	mgr=$tmp/src/pkg/shim/v1/manager.go
	# The patch must apply exactly, once each, or the build stops.
	[[ $(grep -c 'sys.SetOOMScore(cmd.Process.Pid, oomScoreMax)' "$mgr") == 1 &&
		$(grep -c '^	"github.com/containerd/containerd/v2/pkg/sys"$' "$mgr") == 1 ]] ||
		die "gVisor $GVISOR_VERSION's pkg/shim/v1/manager.go no longer has the OOM score line setup.sh replaces; review the patch"
	sed -i -e 's/sys.SetOOMScore(cmd.Process.Pid, oomScoreMax)/shim.AdjustOOMScore(cmd.Process.Pid)/' \
		-e 's|^	"github.com/containerd/containerd/v2/pkg/sys"$|	_ "github.com/containerd/containerd/v2/pkg/sys"|' "$mgr"
	(cd "$tmp/src" && GOFLAGS='' GOWORK=off CGO_ENABLED=0 go build -o "$tmp/shim" ./shim) >>"$log" 2>&1 || return 1
	mv -f "$tmp/runsc" "$RUNSC_BIN" && mv -f "$tmp/shim" "$RUNSC_SHIM" && touch "$GVISOR_DIR/.oom-patched"
}
build_gvisor() {
	build_once "gVisor $GVISOR_VERSION" "$GVISOR_DIR" gvisor_ok gvisor_steps \
		"$RUNSC_BIN does not report version $GVISOR_VERSION"
}
if ! gvisor_ok; then
	if $CHECK_ONLY; then
		need "gVisor runsc $GVISOR_VERSION in $GVISOR_DIR"
	else
		build_gvisor
	fi
fi

# ---- the Debian image -----------------------------------------------------------
# Keyed by the recipe: a changed recipe builds anew (testenv.DebianImage
# finds it by the same key).
DEBIAN_KEY=$(sha256sum "$BOXD_REPO/images/debian/archive.sh" | cut -c1-16)
DEBIAN_TAR=$BOXD_DEPS/images/debian-$DEBIAN_KEY.tar
debian_ok() { [[ -s $DEBIAN_TAR ]]; }
debian_steps() { # TMP LOG
	echo "setup: building the Debian image into $DEBIAN_TAR (a few minutes the first time; log: $2)" >&2
	bash "$BOXD_REPO/images/debian/archive.sh" "$1/debian.tar" >>"$2" 2>&1 &&
		mv -f "$1/debian.tar" "$DEBIAN_TAR"
}
if ! debian_ok; then
	if $CHECK_ONLY; then
		need "the Debian image $DEBIAN_TAR"
	else
		[[ $(id -u) -eq 0 ]] || die "the Debian image is missing and not root: run 'sudo $0'"
		build_once "the Debian image" "$BOXD_DEPS/images" debian_ok debian_steps "$DEBIAN_TAR was not built"
	fi
fi

# ---- protoc plugins -----------------------------------------------------------
PLUGIN_BIN=$BOXD_DEPS/bin
# plugin_ok NAME VERSION: installed at that version? (go.mod versions have a
# leading "v"; the plugins print it with or without.)
plugin_ok() {
	local out
	[[ -x $PLUGIN_BIN/$1 ]] || return 1
	out=$("$PLUGIN_BIN/$1" --version 2>/dev/null) || return 1
	[[ " $out " == *" $2 "* || " $out " == *" ${2#v} "* ]]
}
install_plugin() { # NAME PACKAGE VERSION
	mkdir -p "$PLUGIN_BIN" || die "cannot create $PLUGIN_BIN"
	echo "setup: installing $1 $3 into $PLUGIN_BIN" >&2
	local log="$PLUGIN_BIN/.$1.log"
	if ! (cd / && GOFLAGS='' GOBIN=$PLUGIN_BIN go install "$2@$3") >"$log" 2>&1; then
		cat "$log" >&2
		die "go install $2@$3 failed"
	fi
	rm -f "$log"
	plugin_ok "$1" "$3" || die "$PLUGIN_BIN/$1 does not report version $3"
}
if ! plugin_ok protoc-gen-go "$PROTOBUF_VERSION"; then
	if $CHECK_ONLY; then need "protoc-gen-go $PROTOBUF_VERSION"; else
		install_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOBUF_VERSION"
	fi
fi
if ! plugin_ok protoc-gen-connect-go "$CONNECT_VERSION"; then
	if $CHECK_ONLY; then need "protoc-gen-connect-go $CONNECT_VERSION"; else
		install_plugin protoc-gen-connect-go connectrpc.com/connect/cmd/protoc-gen-connect-go "$CONNECT_VERSION"
	fi
fi

# ---- Docker CLI -----------------------------------------------------------------
# Debian's docker.io, downloaded and unpacked, never installed: only its
# docker client is kept (e2e TestDocker* point it at boxd's --docker-socket),
# so no dockerd, containerd or iptables rules come with it.
DOCKER_CLI_DIR=$BOXD_DEPS/docker-cli
DOCKER_CLI=$DOCKER_CLI_DIR/docker
if [[ ! -x $DOCKER_CLI ]]; then
	if $CHECK_ONLY; then need "docker CLI (Debian's docker.io, unpacked)"; else
		echo "setup: unpacking Debian's docker.io client into $DOCKER_CLI_DIR" >&2
		tmp=$(mktemp -d)
		chmod 0755 "$tmp" # apt-get download runs as _apt where it can
		(cd "$tmp" && apt-get download docker.io) >&2 || die "apt-get download docker.io failed"
		dpkg-deb -x "$tmp"/docker.io_*.deb "$tmp/x" || die "dpkg-deb -x docker.io failed"
		mkdir -p "$DOCKER_CLI_DIR" || die "cannot create $DOCKER_CLI_DIR"
		install -m 0755 "$tmp/x/usr/bin/docker" "$DOCKER_CLI" || die "no usr/bin/docker in docker.io"
		rm -rf "$tmp"
	fi
fi

# ---- Kubernetes control plane ------------------------------------------------------
# kube-apiserver, kubectl and etcd for the fleet's tests (e2e TestFleet,
# internal/fleet), built by scripts/k8s-bins.sh into $BOXD_DEPS/k8s-KEY
# (about 8 minutes on 2 idle cores the first time; nothing afterwards).
if ! K8S_DIR=$("$BOXD_REPO/scripts/k8s-bins.sh" --check); then
	if $CHECK_ONLY; then need "Kubernetes binaries (scripts/k8s-bins.sh)"; else
		K8S_DIR=$("$BOXD_REPO/scripts/k8s-bins.sh") || die "scripts/k8s-bins.sh failed"
	fi
fi

if ((${#missing[@]})); then
	printf 'setup: missing: %s\n' "${missing[@]}" >&2
	exit 1
fi

# ---- report ---------------------------------------------------------------------
echo "runc=$RUNC_BIN"
echo "runsc=$RUNSC_BIN"
echo "containerd-shim-runsc-v1=$RUNSC_SHIM"
echo "busybox=${APT_FILE[busybox-static]}"
echo "debootstrap=${APT_FILE[debootstrap]}"
echo "protoc=${APT_FILE[protobuf-compiler]}"
echo "debian-image=$DEBIAN_TAR"
echo "containerd-version=$CONTAINERD_VERSION"
for t in "${CTRD_TOOLS[@]}"; do
	echo "$t=$CTRD_BIN/$t"
done
echo "protoc-gen-go=$PLUGIN_BIN/protoc-gen-go"
echo "docker=$DOCKER_CLI"
echo "protoc-gen-connect-go=$PLUGIN_BIN/protoc-gen-connect-go"
echo "k8s=$K8S_DIR"
