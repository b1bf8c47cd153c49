#!/usr/bin/env bash
# images/debian/archive.sh OUT.tar [REF]
#
# Builds the Debian bookworm image of the code interpreter as a
# docker-archive tar that `boxctl image import OUT.tar` accepts, tagged REF
# (default boxd/debian:bookworm). With mmdebstrap --variant=minbase from
# Debian's packages: bash, coreutils, git, ca-certificates, curl, python3,
# python3-requests, and the Jupyter stack boxd's code interpreter drives
# (python3-ipykernel, python3-jupyter-client, python3-matplotlib). No
# documentation, man pages or translations (dpkg path-exclude), no apt
# lists or caches, no Recommends; matplotlib's font cache made for root and
# the `sandbox` user (uid/gid 1000, bash); /workspace.
# Needs root and mmdebstrap (scripts/setup.sh installs it), and the Debian
# mirror the host's apt uses (DEBIAN_MIRROR overrides it).
#
# The archive is written to OUT.tar.tmp.$$ and renamed to OUT.tar at the
# end, so OUT.tar either does not exist or is complete.
set -euo pipefail

die() { echo "images/debian/archive.sh: $*" >&2; exit 1; }

[[ $# -ge 1 && $# -le 2 ]] || die "usage: $0 OUT.tar [REF]"
OUT=$1
REF=${2:-boxd/debian:bookworm}
SUITE=${DEBIAN_SUITE:-bookworm}
PACKAGES=bash,coreutils,git,ca-certificates,curl,python3,python3-requests,python3-ipykernel,python3-jupyter-client,python3-matplotlib,python3-munkres

[[ $(id -u) -eq 0 ]] || die "must run as root (mmdebstrap's root mode)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found (run scripts/setup.sh)"

# The host's Debian archive (not the security one), from apt's sources.
find_mirror() {
	local uri
	uri=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null |
		grep -v security | grep debian | head -n1) || true
	echo "${uri%/}"
}
MIRROR=${DEBIAN_MIRROR:-$(find_mirror)}
[[ -n $MIRROR ]] || MIRROR=$(sed -n 's/^URIs: *\([^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)
[[ -n $MIRROR ]] || die "could not find the host's Debian mirror in apt's sources; set DEBIAN_MIRROR"

start=$(date +%s.%N)
WORK=$(mktemp -d "${OUT}.work.XXXXXX")
trap 'rm -rf "$WORK" "$OUT.tmp.$$"' EXIT
mkdir -p "$WORK/img"

# Depends that only debugging and compiling need, nothing the interpreter
# runs: gdb (debugpy's process attach), python3-pythran (scipy's compiler,
# which brings g++, boost and the -dev packages: half the image) and
# python3-sympy (fontTools' symbolic module). A local package provides
# them, so apt leaves them out and stays consistent; `apt-get install gdb`
# in a sandbox still installs the real one. python3-munkres stands for
# python3-scipy, fontTools' other alternative.
mkdir -p "$WORK/slim/DEBIAN"
cat >"$WORK/slim/DEBIAN/control" <<'CONTROL'
Package: boxd-interp-slim
Version: 1
Architecture: all
Maintainer: boxd
Priority: optional
Provides: gdb, python3-pythran, python3-sympy
Description: boxd's code interpreter image without build and debug tools
 Provides what the Jupyter stack depends on only for debugging and compiling.
CONTROL
dpkg-deb --root-owner-group --build "$WORK/slim" "$WORK/slim.deb" >/dev/null

echo "mmdebstrap --variant=minbase $SUITE from $MIRROR (packages: $PACKAGES)" >&2
# Device nodes stay out of the tar: the sandbox's /dev is the runtime's.
if ! mmdebstrap --variant=minbase --include="$PACKAGES" --format=tar \
	--skip=output/dev --skip=output/mknod \
	--aptopt='APT::Install-Recommends "false"' \
	--essential-hook="copy-in $WORK/slim.deb /tmp" \
	--essential-hook='chroot "$1" dpkg -i /tmp/slim.deb && rm "$1/tmp/slim.deb"' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-include=/usr/share/locale/locale.alias' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--customize-hook='chroot "$1" groupadd -g 1000 sandbox' \
	--customize-hook='chroot "$1" useradd -m -u 1000 -g 1000 -s /bin/bash sandbox' \
	--customize-hook='install -d -m 0755 -o 1000 -g 1000 "$1/workspace"' \
	--customize-hook='echo boxd-debian > "$1/etc/hostname"' \
	--customize-hook=': > "$1/etc/resolv.conf"' \
	--customize-hook='chroot "$1" env HOME=/root python3 -c "import matplotlib.font_manager"' \
	--customize-hook='chroot "$1" runuser -u sandbox -- env HOME=/home/sandbox python3 -c "import matplotlib.font_manager"' \
	--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*.log "$1"/var/log/apt/* "$1"/tmp/* "$1"/var/tmp/*' \
	"$SUITE" "$WORK/layer.tar" "$MIRROR" >"$WORK/log" 2>&1; then
	tail -n 40 "$WORK/log" >&2
	die "mmdebstrap failed"
fi

# docker-archive: manifest.json, the image config, one layer.
layer_sum=$(sha256sum "$WORK/layer.tar" | cut -d' ' -f1)
mkdir -p "$WORK/img/$layer_sum"
mv "$WORK/layer.tar" "$WORK/img/$layer_sum/layer.tar"
cat >"$WORK/img/config.json" <<EOF
{"architecture":"$(dpkg --print-architecture)","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","LANG=C.UTF-8"],"Cmd":["/bin/bash"],"WorkingDir":"/workspace"},"rootfs":{"type":"layers","diff_ids":["sha256:$layer_sum"]}}
EOF
config_sum=$(sha256sum "$WORK/img/config.json" | cut -d' ' -f1)
mv "$WORK/img/config.json" "$WORK/img/$config_sum.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]\n' \
	"$config_sum" "$REF" "$layer_sum" >"$WORK/img/manifest.json"
tar -C "$WORK/img" -cf "$OUT.tmp.$$" manifest.json "$config_sum.json" "$layer_sum"
mv -f "$OUT.tmp.$$" "$OUT"

end=$(date +%s.%N)
size=$(du -h "$OUT" | cut -f1)
awk -v s="$start" -v e="$end" -v o="$OUT" -v z="$size" 'BEGIN { printf "built %s in %.1fs (%s)\n", o, e - s, z }'
