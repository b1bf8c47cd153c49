#!/usr/bin/env bash
# bench/run.sh: boxd against Docker and ctr on one private containerd, then
# the Go micro-benchmarks (make bench runs scripts/setup.sh and builds first).
#
# Adds to what scripts/setup.sh installs Debian's docker.io (dockerd 20.10),
# if dockerd is missing. boxbench runs its own private dockerd on the
# private containerd; it never starts or uses the host's docker service or
# /var/run/docker.sock.
#
# Results go to bench/results/ (latest.md, latency.png, concurrency.png,
# micro.txt). A full run takes about 12 minutes on 2 cores. Knobs (see
# bench/README.md):
#   BENCH_QUICK=1   small run for development (about 2 minutes; writes to
#                   bench/results/quick/ and skips the micro-benchmarks)
#   BENCH_N=30      rounds of the CLI exec scenario; the others scale from it
#   BENCH_BURST=100 sandboxes requested at once
#   BENCH_LEVELS=1,10,50,100  BENCH_EXECS=2  BENCH_DENSITY=50,100
#   BENCH_ONLY=exec,tti,oneshot,files,concurrency,density,ports,sdk,network,commitfork,pull,owner,pause,build,pool,gvisor,volumes,diff,code,checkpoint
#   BENCH_OUT=DIR   BENCH_KEEP=1 (keep the run's directory, for debugging)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v dockerd >/dev/null; then
	[[ $(id -u) -eq 0 ]] || { echo "bench: dockerd missing and not root: run 'sudo apt-get install docker.io' or 'sudo make bench'" >&2; exit 1; }
	echo "bench: installing Debian's docker.io (dockerd 20.10)" >&2
	# Whatever the package's maintainer scripts do with the host's docker
	# service is the host's business; boxbench does not use it.
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >&2
	command -v dockerd >/dev/null || { echo "bench: dockerd still missing after installing docker.io" >&2; exit 1; }
fi

go build -C bench -o ../bin/boxbench ./boxbench
bin/boxbench

if [[ ${BENCH_QUICK:-} =~ ^(1|t|T|true|TRUE|True)$ ]]; then
	exit 0
fi
echo
echo "Go micro-benchmarks (compare runs with benchstat):"
go test -run '^$' -bench . -benchmem ./oci/ ./agent/... ./runtime/ | tee bench/results/micro.txt
