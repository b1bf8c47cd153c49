// Measures the TypeScript SDK against the boxd at $BOXD_SOCKET: the exec
// round trip of `true` (median of N) and 100 MiB through sb.files: write()
// of one Uint8Array, read() (returns a new 100 MiB array) and readStream()
// (the transport alone: pieces dropped as they come).
//
//   BOXD_SOCKET=... node dist/bench/bench.js [--size-mib 100] [--execs 200] [--rounds 5]
//
// Prints one JSON object.

import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { Sandbox } from "../src/index.js";

const { values: a } = parseArgs({
  options: {
    "size-mib": { type: "string", default: "100" },
    execs: { type: "string", default: "200" },
    rounds: { type: "string", default: "5" },
  },
});
const size = Number(a["size-mib"]) << 20;
const execs = Number(a.execs);
const rounds = Number(a.rounds);

const median = (xs: number[]): number => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const now = (): number => Number(process.hrtime.bigint()) / 1e6;
const round = (x: number, d = 3): number => Math.round(x * 10 ** d) / 10 ** d;

const data = randomBytes(size);
const sb = await Sandbox.create({ image: process.env.BOXD_TEST_IMAGE || undefined, memory: "1g", ttl: "10m", labels: { bench: "typescript-sdk" } });
const out: Record<string, number> = {};
try {
  for (let i = 0; i < 10; i++) await sb.exec(["true"]);
  const lat: number[] = [];
  for (let i = 0; i < execs; i++) {
    const t = now();
    await sb.exec(["true"]);
    lat.push(now() - t);
  }
  out.exec_true_median_ms = round(median(lat));
  out.exec_true_p90_ms = round([...lat].sort((x, y) => x - y)[Math.floor(lat.length * 0.9)]);
  const w: number[] = [];
  const r: number[] = [];
  const s: number[] = [];
  for (let i = 0; i < rounds; i++) {
    let t = now();
    await sb.files.write("/workspace/bench.bin", data);
    w.push(now() - t);
    t = now();
    const got = await sb.files.read("/workspace/bench.bin");
    r.push(now() - t);
    if (got.length !== size) throw new Error(`read ${got.length} bytes, wrote ${size}`);
    t = now();
    let n = 0;
    for await (const p of sb.files.readStream("/workspace/bench.bin")) n += p.length;
    s.push(now() - t);
    if (n !== size) throw new Error(`streamed ${n} bytes, wrote ${size}`);
    if (process.env.BENCH_VERBOSE) console.error(`write ${w.at(-1)!.toFixed(0)} ms, read ${r.at(-1)!.toFixed(0)} ms, stream ${s.at(-1)!.toFixed(0)} ms`);
  }
  const mibs = (ms: number): number => round((size / (1 << 20)) / (ms / 1000), 1);
  out.write_median_ms = round(median(w), 1);
  out.write_mib_s = mibs(median(w));
  out.read_median_ms = round(median(r), 1);
  out.read_mib_s = mibs(median(r));
  out.read_stream_median_ms = round(median(s), 1);
  out.read_stream_mib_s = mibs(median(s));
} finally {
  await sb.delete();
}
console.log(JSON.stringify(out));
