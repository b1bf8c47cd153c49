#!/usr/bin/env bash
# bench/run.sh: boxd against its peers on one private containerd (make bench).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go run ./bench/boxbench -n "${BENCH_N:-50}" -out bench/results/latest.md
echo
echo "Go micro-benchmarks (compare runs with benchstat):"
go test -run '^$' -bench . -benchmem ./oci/ ./agent/ | tee bench/results/micro.txt
