"""Measures the Python SDK against the boxd at $BOXD_SOCKET: exec round trip
of `true` (median of N) and 100 MiB file write/read through sb.files:
write(bytes), read() (returns a new 100 MiB bytes) and read_into() a sink
(the transport alone: no result to allocate).

    BOXD_SOCKET=... python3 bench/bench.py [--size-mib 100] [--execs 200]
Prints one JSON object.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import boxd  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=100)
    ap.add_argument("--execs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--image", default=os.environ.get("BOXD_TEST_IMAGE") or None)
    a = ap.parse_args()
    data = os.urandom(a.size_mib << 20)
    out = {}
    with boxd.Sandbox.create(image=a.image, memory="1g", ttl="10m", labels={"bench": "python-sdk"}) as sb:
        for _ in range(10):
            sb.exec(["true"])
        lat = []
        for _ in range(a.execs):
            t = time.perf_counter()
            sb.exec(["true"])
            lat.append(time.perf_counter() - t)
        out["exec_true_median_ms"] = round(statistics.median(lat) * 1e3, 3)
        out["exec_true_p90_ms"] = round(sorted(lat)[int(len(lat) * 0.9)] * 1e3, 3)
        class Sink:
            def write(self, b: object) -> None:
                pass

        w, r, s = [], [], []
        for _ in range(a.rounds):
            t = time.perf_counter()
            sb.files.write("/workspace/bench.bin", data)
            w.append(time.perf_counter() - t)
            t = time.perf_counter()
            got = sb.files.read("/workspace/bench.bin")
            r.append(time.perf_counter() - t)
            if os.environ.get("BENCH_VERBOSE"):
                print(f"write {w[-1]:.3f}s read {r[-1]:.3f}s", file=sys.stderr)
            assert len(got) == len(data)
            del got
            t = time.perf_counter()
            n = sb.files.read_into("/workspace/bench.bin", Sink())
            s.append(time.perf_counter() - t)
            assert n == len(data)
            sb.files.rm("/workspace/bench.bin")
        mib = len(data) / (1 << 20)
        out["write_mib_s"] = round(mib / statistics.median(w))
        out["read_mib_s"] = round(mib / statistics.median(r))
        out["read_into_mib_s"] = round(mib / statistics.median(s))
        out["size_mib"] = a.size_mib
    print(json.dumps(out))


if __name__ == "__main__":
    main()
