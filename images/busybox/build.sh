#!/usr/bin/env bash
# images/busybox/build.sh OUTDIR
#
# Builds a minimal root filesystem directory from the host's static busybox
# (Debian package busybox-static): /bin/busybox plus one symlink per applet
# in /bin, /etc/{passwd,group,hostname,os-release}, and empty /tmp (1777),
# /root, /workspace, /proc, /sys, /dev. Takes well under a second.
#
# BUSYBOX=/path/to/busybox overrides the binary (it must be static).
# The rootfs is assembled in OUTDIR.tmp.$$ and renamed to OUTDIR at the end,
# so OUTDIR either does not exist or is a complete image.
set -euo pipefail

die() { echo "images/busybox/build.sh: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || die "usage: $0 OUTDIR"
OUT=$1

BB=${BUSYBOX:-}
if [[ -z $BB ]]; then
	for c in /bin/busybox /usr/bin/busybox; do
		if [[ -x $c ]]; then BB=$c; break; fi
	done
fi
[[ -n $BB && -x $BB ]] || die "busybox not found (apt-get install busybox-static, or run scripts/setup.sh)"
# A dynamically linked busybox (Debian's "busybox" package) would not run in
# an empty rootfs.
if command -v file >/dev/null && ! file -L "$BB" | grep -q 'statically linked'; then
	die "$BB is not statically linked (install busybox-static)"
fi
if [[ -e $OUT ]] && [[ -n $(ls -A "$OUT" 2>/dev/null) ]]; then
	die "$OUT exists and is not empty"
fi

TMP="$OUT.tmp.$$"
trap 'rm -rf "$TMP"' EXIT
rm -rf "$TMP"
mkdir -p "$TMP"
cd "$TMP"

install -d -m 0755 bin sbin etc dev proc sys usr/bin usr/sbin var run
install -d -m 0700 root
install -d -m 1777 tmp var/tmp
install -d -m 0755 workspace home/sandbox
# /workspace and the home directory belong to the sandbox user (uid 1000);
# root inside the sandbox can still write them. Unprivileged builds keep the
# caller's ownership.
if [[ $(id -u) -eq 0 ]]; then
	chown 1000:1000 workspace home/sandbox
fi
install -m 0755 "$BB" bin/busybox

# One symlink per applet, all in /bin ("busybox --list" prints bare names).
# perl (Essential in Debian) makes them in one process: a fork per applet
# costs seconds on a loaded machine.
"$BB" --list | perl -ne 'chomp; next if $_ eq "" || $_ eq "busybox"; unlink "bin/$_"; symlink("busybox", "bin/$_") or die "symlink bin/$_: $!\n"'
[[ -L bin/sh ]] || die "busybox has no sh applet"
# Scripts commonly use absolute paths in /usr/bin and /usr/sbin.
ln -s ../../bin/env usr/bin/env

cat >etc/passwd <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >etc/group <<'GROUP'
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
GROUP
cat >etc/shadow <<'SHADOW'
root:*:19000:0:99999:7:::
sandbox:*:19000:0:99999:7:::
nobody:*:19000:0:99999:7:::
SHADOW
chmod 0640 etc/shadow
echo boxd >etc/hostname
cat >etc/os-release <<OSREL
NAME="boxd busybox"
ID=boxd-busybox
PRETTY_NAME="boxd busybox image ($("$BB" 2>&1 | head -n1 | awk '{print $1, $2}'))"
HOME_URL="https://github.com/boxd-dev/boxd"
OSREL
: >etc/resolv.conf
printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >etc/hosts

cd /
mkdir -p "$(dirname "$OUT")"
[[ -d $OUT ]] && rmdir "$OUT" 2>/dev/null # checked empty above
# -T: fail (rather than move TMP inside OUT) if a concurrent build won.
mv -T "$TMP" "$OUT" || die "could not rename $TMP to $OUT (concurrent build?)"
trap - EXIT
