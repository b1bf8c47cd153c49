#!/usr/bin/env bash
# scripts/k8s-bins.sh: build the Kubernetes control plane the fleet's tests run
# on loopback: kube-apiserver and kubectl (from the tools module in
# scripts/k8s-tools) and etcd (Debian's etcd-server, downloaded and unpacked
# with dpkg-deb -x, never installed: no service comes with it).
#
# The binaries go to $BOXD_DEPS/k8s-KEY/, KEY a hash of the tools module's
# go.mod and go.sum and the Go version, built in a temporary directory and
# renamed into place, so a warm machine pays nothing and a half-built
# directory is never seen. A cold build takes about 12 CPU-minutes (7-8 min
# wall on 2 idle cores) and grows GOCACHE by about 2 GB.
#
# Prints the directory on stdout. With --check it builds nothing and exits 1
# if the directory is missing; with --dir it only prints the directory.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
boxd_go

TOOLS=$BOXD_REPO/scripts/k8s-tools
K8S_VERSION=v1.34.10

k8s_key() {
	{
		cat "$TOOLS/go.mod" "$TOOLS/go.sum"
		go env GOVERSION
	} | sha256sum | cut -c1-12
}
K8S_DIR=$BOXD_DEPS/k8s-$(k8s_key)

k8s_ok() {
	[[ -x $K8S_DIR/kube-apiserver && -x $K8S_DIR/kubectl && -x $K8S_DIR/etcd ]]
}

case ${1:-} in
--dir)
	echo "$K8S_DIR"
	exit 0
	;;
--check)
	k8s_ok || exit 1
	echo "$K8S_DIR"
	exit 0
	;;
"") ;;
*) die "usage: $0 [--check|--dir]" ;;
esac

build() {
	local tmp=$1 log=$2 minor=${K8S_VERSION#v1.}
	minor=${minor%%.*}
	echo "k8s-bins: building kube-apiserver and kubectl $K8S_VERSION into $K8S_DIR (about 8 minutes on 2 idle cores the first time; log: $log)" >&2
	(cd "$TOOLS" && GOFLAGS=-buildvcs=false go build -trimpath -o "$tmp/" \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl) >>"$log" 2>&1 || return 1
	echo "k8s-bins: unpacking Debian's etcd-server" >&2
	mkdir -p "$tmp/deb"
	chmod 0755 "$tmp/deb" # apt-get download runs as _apt where it can
	(cd "$tmp/deb" && apt-get download etcd-server) >>"$log" 2>&1 || return 1
	dpkg-deb -x "$tmp"/deb/etcd-server_*.deb "$tmp/deb/x" >>"$log" 2>&1 || return 1
	install -m 0755 "$tmp/deb/x/usr/bin/etcd" "$tmp/etcd" || return 1
	rm -rf "$tmp/deb"
}

if ! k8s_ok; then
	mkdir -p "$BOXD_DEPS" || die "cannot create $BOXD_DEPS (run as root, or set BOXD_DEPS to a writable directory)"
	exec {lock}>"$BOXD_DEPS/.k8s-bins.lock"
	flock -w 1800 "$lock" || die "timed out waiting for another k8s-bins.sh"
	if ! k8s_ok; then
		tmp=$K8S_DIR.tmp.$$
		log=$BOXD_DEPS/k8s-build.log
		rm -rf "$tmp"
		mkdir -p "$tmp"
		: >"$log"
		if ! build "$tmp" "$log"; then
			tail -n 40 "$log" >&2
			rm -rf "$tmp"
			die "building the Kubernetes binaries failed (log: $log)"
		fi
		rm -rf "$K8S_DIR"
		mv "$tmp" "$K8S_DIR"
	fi
	exec {lock}>&-
fi
k8s_ok || die "$K8S_DIR lacks kube-apiserver, kubectl or etcd"
echo "$K8S_DIR"
