#!/usr/bin/env bash
# images/debian/build.sh OUTDIR
#
# Builds a Debian bookworm root filesystem directory for boxd sandboxes:
# debootstrap --variant=minbase plus bash, python3, coreutils, git and
# ca-certificates, apt caches cleaned, /workspace, and a `sandbox` user
# (uid/gid 1000). Needs root and debootstrap (scripts/setup.sh installs it).
#
# The Debian mirror is the one the host's apt uses (from
# /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources / *.list);
# override with DEBIAN_MIRROR=http://... . DEBIAN_SUITE defaults to bookworm.
#
# The rootfs is built in OUTDIR.tmp.$$ and renamed to OUTDIR when complete,
# so OUTDIR either does not exist or is a finished image.
set -euo pipefail

die() { echo "images/debian/build.sh: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || die "usage: $0 OUTDIR"
OUT=$1
SUITE=${DEBIAN_SUITE:-bookworm}
PACKAGES=bash,python3,coreutils,git,ca-certificates

[[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap needs it)"
command -v debootstrap >/dev/null || die "debootstrap not found (run scripts/setup.sh)"
if [[ -e $OUT ]] && [[ -n $(ls -A "$OUT" 2>/dev/null) ]]; then
	die "$OUT exists and is not empty"
fi

# find_mirror prints the first Debian archive URI (not the security archive)
# configured for the host's apt.
find_mirror() {
	local f uri
	shopt -s nullglob
	# deb822 format: "URIs: http://MIRROR/debian"
	for f in /etc/apt/sources.list.d/*.sources; do
		uri=$(awk '
			/^[ \t]*#/ { next }
			/^$/ { if (deb && uri != "" && uri !~ /security/) { print uri; exit } deb = 0; uri = ""; next }
			tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
			tolower($1) == "uris:" { uri = $2 }
			END { if (deb && uri != "" && uri !~ /security/) print uri }
		' "$f" | head -n1)
		if [[ -n $uri ]] && [[ $uri == */debian* ]]; then echo "$uri"; return; fi
	done
	# one-line format: "deb [opts] http://MIRROR/debian bookworm main"
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r $f ]] || continue
		uri=$(awk '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($i !~ /security/ && $i ~ /debian/) { print $i; exit }
			}
		' "$f")
		if [[ -n $uri ]]; then echo "$uri"; return; fi
	done
}

MIRROR=${DEBIAN_MIRROR:-$(find_mirror)}
[[ -n $MIRROR ]] || die "could not find the host's Debian mirror in /etc/apt; set DEBIAN_MIRROR"

start=$(date +%s.%N)
TMP="$OUT.tmp.$$"
cleanup() {
	# debootstrap mounts proc/sys inside the target while it runs; make sure
	# nothing stays mounted if it fails half way.
	if [[ -d $TMP ]]; then
		umount -R -l "$TMP/proc" "$TMP/sys" "$TMP/dev/pts" 2>/dev/null || true
		rm -rf --one-file-system "$TMP"
	fi
}
trap cleanup EXIT
mkdir -p "$(dirname "$OUT")"
rm -rf "$TMP"

echo "debootstrap --variant=minbase $SUITE from $MIRROR (packages: $PACKAGES)" >&2
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$TMP" "$MIRROR" >"$OUT.debootstrap.log" 2>&1; then
	tail -n 30 "$OUT.debootstrap.log" >&2
	[[ -f $TMP/debootstrap/debootstrap.log ]] && tail -n 30 "$TMP/debootstrap/debootstrap.log" >&2
	die "debootstrap failed (full log: $OUT.debootstrap.log)"
fi
rm -f "$OUT.debootstrap.log"

# The sandbox user (uid/gid 1000) with a home directory.
chroot "$TMP" /usr/sbin/groupadd -g 1000 sandbox
chroot "$TMP" /usr/sbin/useradd -m -u 1000 -g 1000 -s /bin/bash sandbox
install -d -m 0755 -o 1000 -g 1000 "$TMP/workspace"

echo "boxd-debian" >"$TMP/etc/hostname"

# Clean apt caches and lists, logs debootstrap leaves behind.
chroot "$TMP" /usr/bin/apt-get clean
rm -rf "$TMP"/var/lib/apt/lists/* "$TMP"/var/cache/apt/*.bin \
	"$TMP"/var/cache/debconf/*-old "$TMP"/var/log/*.log "$TMP"/var/log/apt/* \
	"$TMP"/tmp/* "$TMP"/var/tmp/*
rm -f "$TMP/etc/resolv.conf"
: >"$TMP/etc/resolv.conf"

# Must not leave mounts behind.
if grep -q " $(realpath "$TMP")/" /proc/self/mounts; then
	umount -R -l "$TMP/proc" "$TMP/sys" 2>/dev/null || true
fi

[[ -d $OUT ]] && rmdir "$OUT" # checked empty above
mv -T "$TMP" "$OUT" || die "could not rename $TMP to $OUT (concurrent build?)"
trap - EXIT

end=$(date +%s.%N)
size=$(du -sh --one-file-system "$OUT" | cut -f1)
awk -v s="$start" -v e="$end" -v o="$OUT" -v z="$size" 'BEGIN { printf "built %s in %.1fs (%s)\n", o, e - s, z }'
