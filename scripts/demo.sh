#!/usr/bin/env bash
# scripts/demo.sh: a real boxd session, start to finish (make demo).
#
# Uses the boxd at $BOXD_SOCKET if one answers there; otherwise starts a
# private containerd and boxd under a temporary directory and stops both at
# the end. Builds the Debian image (bash, python3, git) once with debootstrap
# and caches it under $BOXD_CACHE (default /var/cache/boxd).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$REPO/bin
CACHE=${BOXD_CACHE:-/var/cache/boxd}
IMAGE=boxd/debian:bookworm
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# quote spells its arguments as a shell reads them back: a word that needs
# no quotes as it is, else in single quotes, or double quotes for one
# holding a single quote and nothing a shell expands in double quotes
# (newlines kept as they are).
quote() {
	local a out=()
	for a; do
		if [[ $a =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
			out+=("$a")
		elif [[ $a != *"'"* ]]; then
			out+=("'$a'")
		elif [[ $a != *[\$\`\\\"!]* ]]; then
			out+=("\"$a\"")
		else
			out+=("${a@Q}")
		fi
	done
	printf '%s' "${out[*]}"
}
# run shows a command exactly as it runs, quoted so it can be pasted, and
# runs it.
run() { printf '$ %s\n' "$(quote "$@")"; "$@"; }
# capture VAR CMD... shows and runs VAR=$(CMD...).
capture() {
	local var=$1 out
	shift
	printf '$ %s=$(%s)\n' "$var" "$(quote "$@")"
	out=$("$@") || return
	printf -v "$var" '%s' "$out"
}
# runpipe CMD... '|' FILTER... shows and runs CMD 2>&1 | FILTER.
runpipe() {
	local i
	for ((i = 1; i <= $#; i++)); do [[ ${!i} == '|' ]] && break; done
	local left=("${@:1:i-1}") right=("${@:i+1}")
	printf '$ %s 2>&1 | %s\n' "$(quote "${left[@]}")" "$(quote "${right[@]}")"
	"${left[@]}" 2>&1 | "${right[@]}"
}

[[ $(id -u) -eq 0 ]] || { echo "demo: run as root (it starts containerd and boxd)" >&2; exit 1; }

mkdir -p "$CACHE"
if [[ ! -x $CACHE/rootfs-debian/usr/bin/python3 ]]; then
	say "building the Debian image with debootstrap (once; about 3-4 minutes)"
	rm -rf "$CACHE/rootfs-debian"
	"$REPO/images/debian/build.sh" "$CACHE/rootfs-debian"
fi

WORK=""
cleanup() {
	local rc=${1:-$?}
	if [[ -n $WORK ]]; then
		[[ -n ${BOXD_PID:-} ]] && kill "$BOXD_PID" 2>/dev/null && wait "$BOXD_PID" 2>/dev/null
		"$REPO/scripts/containerd.sh" stop "$WORK/ctrd" >/dev/null 2>&1 || true
		# runsc pins one empty network namespace per state root
		# (null-netns) and keeps it; unmount it before removing the root.
		local m
		for m in $(awk -v w="$WORK/" 'index($5, w) == 1 && $5 ~ /\/null-netns$/ {print $5}' /proc/self/mountinfo | sort -u); do
			while umount -l "$m" 2>/dev/null; do :; done
		done
		rm -rf "$WORK"
	fi
	exit $rc
}
trap cleanup EXIT

export BOXD_SOCKET=${BOXD_SOCKET:-/run/boxd/boxd.sock}
if ! "$BIN/boxctl" ls >/dev/null 2>&1; then
	say "no boxd at $BOXD_SOCKET: starting a private containerd and boxd"
	WORK=$(mktemp -d /tmp/boxd-demo-XXXXXX)
	chmod 0711 "$WORK" # the sandbox's mapped root must traverse to its rootfs
	mkdir -p "$WORK/ctrd"
	"$REPO/scripts/containerd.sh" start "$WORK/ctrd" >/dev/null
	export BOXD_SOCKET=$WORK/run/boxd.sock
	"$BIN/boxd" --socket "$BOXD_SOCKET" --containerd "$WORK/ctrd/containerd.sock" --state-dir "$WORK/state" \
		--default-image "$IMAGE" >"$WORK/boxd.log" 2>&1 &
	BOXD_PID=$!
	for _ in $(seq 100); do "$BIN/boxctl" ls >/dev/null 2>&1 && break; sleep 0.1; done
	"$BIN/boxctl" ls >/dev/null || { cat "$WORK/boxd.log"; exit 1; }
fi
boxctl() { "$BIN/boxctl" "$@"; }
# The commands below are shown as they run; with this set, and boxctl on
# PATH, each can be pasted into a shell.
printf '$ export BOXD_SOCKET=%s\n' "$(quote "$BOXD_SOCKET")"

if ! boxctl image ls | grep -q "^$IMAGE"; then
	say "importing the Debian rootfs as $IMAGE"
	run boxctl image import --rootfs "$CACHE/rootfs-debian" --name "$IMAGE"
fi

say "create a sandbox: 256 MiB, 1 CPU, 64 processes, 10 minute ttl, no network"
capture ID boxctl create --image "$IMAGE" --memory 256m --cpus 1 --pids 64 --ttl 10m --label demo=true
echo "sandbox $ID"
# The demo's exit status is the failing step's, not the clean-up's.
trap 'rc=$?; boxctl rm -f "$ID" >/dev/null 2>&1 || true; cleanup $rc' EXIT

say "copy a Python program in and run it"
PROG=$(mktemp -d)/primes.py
cat >"$PROG" <<'PY'
import os, platform, sys
def primes(n):
    sieve = bytearray([1]) * (n + 1)
    sieve[0:2] = b"\x00\x00"
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(sieve[i * i :: i]))
    return [i for i, v in enumerate(sieve) if v]
p = primes(1_000_000)
print(f"python {platform.python_version()} as uid {os.getuid()} in {os.getcwd()}")
print(f"{len(p)} primes below a million; the last is {p[-1]}")
print("a warning on stderr", file=sys.stderr)
PY
run boxctl cp "$PROG" "$ID:/workspace/"
run boxctl exec "$ID" -- python3 /workspace/primes.py

say "the limits (the disk cap is boxd's default, 10g), as inspect reports them (with the usage now, apart) and as the sandbox sees them"
# Debian's python3, which has the SDK's python3-grpcio (setup.sh installs it).
PY=/usr/bin/python3
# inspect has the limits at the top and the live usage under "usage", with
# some of the same keys: print them apart.
runpipe boxctl inspect "$ID" '|' $PY -c '
import json, sys
s = json.load(sys.stdin)
pick = lambda d, *ks: " ".join(f"{k}={d.get(k)}" for k in ks)
print("limits:    ", pick(s, "memory_bytes", "cpus", "pids", "disk_bytes", "expires_at"))
print("usage now: ", pick(s.get("usage") or {}, "memory_bytes", "pids", "cpu_usec"), pick(s, "disk_used_bytes"))
print("security:  ", pick(s.get("security") or {}, "network", "uid_map"), pick(s, "runtime", "runtime_version"))
'
run boxctl exec "$ID" -- sh -c 'cat /proc/self/uid_map; grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status; ulimit -c -n'

say "the network is unreachable (loopback only)"
run boxctl exec "$ID" -- python3 -c '
import socket
print("interfaces:", [n for _, n in socket.if_nameindex()])
try:
    socket.create_connection(("192.0.2.1", 80), timeout=3)
    print("connected?!")
except OSError as e:
    print("connect to 192.0.2.1:80 failed:", e)
'

say "sandbox root can neither touch boxd's channel to its init nor plant links on the host"
run boxctl exec "$ID" -- sh -c 'echo "uid $(id -u) in the sandbox"; ln -s /run/containerd/containerd.sock /.boxd/run/agent.sock; mkdir -p /workspace/out; echo data >/workspace/out/f; ln -sf /etc/passwd /workspace/out/pw' || true
OUT=$(mktemp -d)
set +e
run boxctl cp "$ID:/workspace/out" "$OUT"
echo "exit code: $? (the link to /etc/passwd is refused; --safe-links would leave it out)"
set -e
run ls -la "$OUT"
rm -rf "$OUT"

say "a web server in the sandbox, published on the host's loopback (the sandbox itself still has no network)"
run boxctl exec -d "$ID" -- python3 -m http.server 8080 --bind 127.0.0.1 --directory /workspace >/dev/null
capture ADDR boxctl port "$ID" 8080
echo "published at $ADDR"
for _ in $(seq 50); do $PY -c "import urllib.request,sys; urllib.request.urlopen('http://$ADDR/primes.py', timeout=1)" 2>/dev/null && break; sleep 0.1; done
run $PY -c "import urllib.request; print(urllib.request.urlopen('http://$ADDR/primes.py', timeout=5).read().decode().splitlines()[0])"

say "the same sandbox from Python, with the SDK in sdk/python"
run env PYTHONPATH="$REPO/sdk/python" $PY -c "
import boxd
sb = boxd.Sandbox.connect('$ID')
r = sb.exec(['python3', '-c', 'print(6*7)'], timeout=5)
print('exit', r.exit_code, 'stdout', r.stdout_text.strip())
sb.files.write('/workspace/from-python.txt', b'written by the SDK')
print(sb.files.read('/workspace/from-python.txt'))
"

say "fork it: two new sandboxes start with its files as they are now (processes are not copied)"
capture FORKS boxctl fork "$ID" -n 2
echo "$FORKS"
for F in $FORKS; do
	run boxctl exec "$F" -- sh -c "ls /workspace; echo written-in-$F > /workspace/mine"
done
run boxctl exec "$ID" -- sh -c 'ls /workspace/mine 2>&1 || true'
run boxctl rm -f $FORKS

say "pause freezes every process (calls are refused while paused); unpause thaws them"
run boxctl pause "$ID"
run boxctl exec "$ID" -- true || true
run boxctl unpause "$ID"
run boxctl exec "$ID" -- echo running again

say "a disk cap: writes past it fail with ENOSPC and the host keeps only what was written"
capture DISK boxctl create --image "$IMAGE" --disk 64m --ttl 5m
run boxctl exec "$DISK" -- sh -c 'dd if=/dev/zero of=/workspace/bomb bs=1M count=200 2>&1 | grep -E "No space|copied"; df -h /workspace | tail -1'
run boxctl rm -f "$DISK"

say "a fork bomb hits the 64-process cap, and the timeout kills its whole tree"
set +e
runpipe boxctl exec --timeout 3s "$ID" -- bash -c 'bomb() { bomb | bomb & }; bomb; sleep 10' '|' tail -3
echo "exit code: $? (124 = timed out)"
set -e
run boxctl exec "$ID" -- sh -c 'echo "still alive; processes now: $(ls -d /proc/[0-9]* | wc -l)"'

say "a one-shot run from the warm pool: a fresh sandbox that never ran code before, deleted after"
run boxctl pool ls
ONE=(boxctl run -- sh -c 'echo "hello from $(hostname)"; ls /workspace')
printf '$ time %s\n' "$(quote "${ONE[@]}")"
time "${ONE[@]}"

say "a sandbox under gVisor: its own kernel between the code and the host's (--runtime gvisor)"
capture GV boxctl create --image "$IMAGE" --runtime gvisor --ttl 5m
run boxctl exec "$GV" -- sh -c 'uname -r; dmesg 2>/dev/null | head -2'
runpipe boxctl inspect "$GV" '|' grep -E '"runtime'
run boxctl rm -f "$GV"

say "destroy it"
run boxctl rm "$ID"
run boxctl ls
