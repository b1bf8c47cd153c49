// Sandbox lifecycle, exec and errors against a real boxd.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { spawnSync } from "node:child_process";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import * as boxd from "../src/index.js";
import { Sandbox } from "../src/index.js";
import { create } from "@bufbuild/protobuf";
import { GetSandboxRequestSchema } from "../src/gen/boxd/v1/boxd_pb.js";
import { MAX_CONNS } from "../src/http1.js";
import { IMAGE, LABELS, bytes, ps, sandbox, sleep, until } from "./support.js";

describe("lifecycle", () => {
  test("every create option, as inspect shows it", async () => {
    // The settings sdk/create-options.json lists for TypeScript, on a real
    // boxd (the egress network needs its own topology: createoptions.test
    // checks its mapping).
    const sb = await Sandbox.create({
      image: IMAGE, memory: "256m", cpus: 0.5, pids: 200, disk: "64m", env: { MODE: "all" }, workdir: "/tmp", labels: LABELS,
      name: "ts-all-options", ttl: "10m", user: "sandbox", readOnly: true, tmpfs: ["/cache:4m"], ulimits: ["nofile=512", "nproc=300"],
      hostname: "ts-all", cpuWeight: 300, memoryLow: "32m", execTimeout: "20s", outputLimit: 1000, idleTimeout: "10m", onIdle: "delete",
      runtime: "runc", cold: true, replace: true, pull: "never",
    });
    try {
      const out = await sb.exec(["sh", "-c", "id -u; hostname; ulimit -n; echo $MODE; pwd; touch /x 2>/dev/null || echo ro"]);
      assert.equal(out.stdoutText, "1000\nts-all\n512\nall\n/tmp\nro\n");
      assert.equal((await sb.exec(["head", "-c", "5000", "/dev/zero"])).stdout.length, 1000);
      const got = (await boxd.defaultClient().sandbox.getSandbox(create(GetSandboxRequestSchema, { id: sb.id }))).sandbox!;
      assert.deepEqual([got.name, got.memoryBytes, got.cpus, got.pids, got.diskBytes, got.workdir], ["ts-all-options", BigInt(256 << 20), 0.5, 200n, BigInt(64 << 20), "/tmp"]);
      assert.deepEqual([got.user, got.hostname, got.security?.readOnlyRootfs, got.ulimits?.nofile, got.ulimits?.nproc], ["sandbox", "ts-all", true, 512n, 300n]);
      assert.ok(got.tmpfs.some((m) => m.path === "/cache"));
      assert.deepEqual([got.cpuWeight, got.memoryLowBytes, got.execTimeout, got.outputLimit], [300n, BigInt(32 << 20), "20s", 1000n]);
      assert.deepEqual([got.idleTimeout, got.onIdle, got.runtime], ["10m0s", "delete", "runc"]);
      assert.ok(got.env.includes("MODE=all"));
    } finally {
      await sb.delete();
    }
  });

  test("create, info, list, connect by id and name, delete", async () => {
    const name = "ts-" + randomBytes(4).toString("hex");
    const sb = await Sandbox.create({ image: IMAGE, memory: "64m", cpus: 0.5, pids: 64, ttl: 600, name, env: { MODE: "test" }, labels: LABELS });
    try {
      const info = await sb.info();
      assert.equal(info.name, name);
      assert.equal(sb.name, name);
      assert.equal(info.memoryBytes, 64 << 20);
      assert.equal(info.cpus, 0.5);
      assert.equal(info.pids, 64);
      assert.equal(info.state, "running");
      assert.ok(info.env.includes("MODE=test"));
      assert.ok(info.usage, "info() has live usage");
      assert.ok(info.usage!.memoryBytes > 0);
      assert.ok((await boxd.list()).some((s) => s.id === sb.id));
      assert.ok((await boxd.list({ labels: LABELS })).some((s) => s.id === sb.id));
      assert.ok(!(await boxd.list({ labels: { "sdk-test": "other" } })).some((s) => s.id === sb.id));
      const byId = await Sandbox.connect(sb.id);
      const byName = await Sandbox.connect(name);
      assert.equal(byName.id, sb.id);
      assert.deepEqual((await byId.exec(["sh", "-c", "echo $MODE"])).stdout, bytes("test\n"));
      await assert.rejects(Sandbox.create({ image: IMAGE, name, labels: LABELS }), boxd.AlreadyExists);
    } finally {
      await sb.delete();
    }
    await assert.rejects(Sandbox.connect(sb.id), boxd.NotFound);
    assert.ok(!(await boxd.list()).some((s) => s.id === sb.id));
  });

  test("await using deletes the sandbox", async () => {
    let id = "";
    {
      await using sb = await Sandbox.create({ image: IMAGE, labels: LABELS });
      id = sb.id;
      assert.equal((await sb.exec("true")).exitCode, 0);
    }
    await assert.rejects(Sandbox.connect(id), boxd.NotFound);
  });

  test("connect to an unknown sandbox: NotFound naming it", async () => {
    const err = await Sandbox.connect("nosuchsandbox").then(
      () => assert.fail("connected to nothing"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof boxd.NotFound);
    assert.ok(err instanceof boxd.BoxdError);
    assert.equal(err.code, "not_found");
    assert.match(err.message, /nosuchsandbox/);
  });

  test("invalid arguments name the field", async () => {
    const e1 = await Sandbox.create({ image: IMAGE, memory: "12xb", labels: LABELS }).catch((e: unknown) => e);
    assert.ok(e1 instanceof boxd.InvalidArgument, String(e1));
    assert.equal(e1.field, "limits.memory");
    const e2 = await Sandbox.create({ image: IMAGE, ttl: "forever", labels: LABELS }).catch((e: unknown) => e);
    assert.ok(e2 instanceof boxd.InvalidArgument, String(e2));
    assert.equal(e2.field, "ttl");
    assert.throws(() => boxd.Sandbox.prototype.execStream.call({ id: "x" } as Sandbox, []), TypeError);
  });

  test("dead socket: Unavailable at once, no hang", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "boxd-ts-"));
    try {
      const dead = path.join(dir, "boxd.sock");
      const c = new boxd.Client(dead);
      const t = Date.now();
      const err = await boxd.list({ client: c }).catch((e: unknown) => e);
      assert.ok(err instanceof boxd.Unavailable, String(err));
      assert.ok(Date.now() - t < 5000);
      assert.ok(err.message.includes(dead), err.message);
      await assert.rejects(Sandbox.create({ client: c }), boxd.Unavailable);
      // A socket file nobody listens on (bound, never listening: ECONNREFUSED).
      const stale = path.join(dir, "stale.sock");
      const py = spawnSync("python3", ["-c", "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", stale]);
      assert.equal(py.status, 0, String(py.stderr));
      const c2 = new boxd.Client({ socket: stale });
      await assert.rejects(Sandbox.connect("x", { client: c2 }), boxd.Unavailable);
      // The streaming path fails the same way.
      const fake = new Sandbox({ id: "x" } as boxd.SandboxInfo, c);
      await assert.rejects(fake.exec(["true"], { stdin: [bytes("x")] }), boxd.Unavailable);
      // The unary path (HTTP/1.1) names the socket too.
      const uerr = await fake.exec(["true"]).catch((e: unknown) => e);
      assert.ok(uerr instanceof boxd.Unavailable && uerr.message.includes(dead), String(uerr));
      await assert.rejects(fake.files.read("/etc/passwd"), boxd.Unavailable);
      c.close();
      c2.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test("sandbox deleted while streams run: they end, typed, no hang", async () => {
    const sb = await Sandbox.create({ image: IMAGE, labels: LABELS });
    await sb.files.mkdir("/tmp/w");
    const ex = sb.execStream(["sh", "-c", "echo up; sleep 60"]);
    const it = ex[Symbol.asyncIterator]();
    const first = await it.next();
    assert.deepEqual(first.value?.data, bytes("up\n"));
    const watch = await sb.files.watch("/tmp/w");
    const drain = async (iterable: AsyncIterator<unknown> | AsyncIterable<unknown>): Promise<unknown> => {
      try {
        const i = Symbol.asyncIterator in iterable ? (iterable as AsyncIterable<unknown>)[Symbol.asyncIterator]() : (iterable as AsyncIterator<unknown>);
        while (!(await i.next()).done) {
          /* drain */
        }
        return "ended";
      } catch (e) {
        return e;
      }
    };
    const outcomes = Promise.all([drain(it), drain(watch)]);
    await sleep(200);
    await (await Sandbox.connect(sb.id)).delete();
    const timeout = new Promise((_, rej) => setTimeout(() => rej(new Error("a stream hung after its sandbox was deleted")), 20000).unref());
    const [execOutcome, watchOutcome] = (await Promise.race([outcomes, timeout])) as unknown[];
    // A typed error, or the end of the stream (with a result for the exec).
    assert.ok(execOutcome instanceof boxd.BoxdError || ex.result !== undefined, String(execOutcome));
    assert.ok(watchOutcome instanceof boxd.BoxdError || watchOutcome === "ended", String(watchOutcome));
    await assert.rejects(sb.exec(["true"]), boxd.NotFound);
  });

  test("the default socket is $BOXD_SOCKET", () => {
    assert.equal(boxd.defaultSocket(), process.env.BOXD_SOCKET);
    assert.equal(new boxd.Client().socket, path.resolve(process.env.BOXD_SOCKET!));
  });
});

describe("exec", () => {
  let sb: Sandbox;
  before(async () => {
    sb = await sandbox();
  });
  after(async () => {
    await sb.delete();
  });

  test("exit code and output", async () => {
    const r = await sb.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], { timeout: 5 });
    assert.equal(r.exitCode, 3);
    assert.deepEqual(r.stdout, bytes("out\n"));
    assert.deepEqual(r.stderr, bytes("err\n"));
    assert.equal(r.stdoutText, "out\n");
    assert.equal(r.stderrText, "err\n");
    assert.equal(r.timedOut, false);
    assert.equal(r.truncated, false);
    assert.equal(r.ok, false);
    assert.ok((await sb.exec(["true"])).ok);
    assert.equal((await sb.exec("echo $((6*7))")).stdoutText, "42\n");
    assert.equal((await sb.exec(["/no/such/command"])).exitCode, 127);
    const slow = await sb.exec(["sh", "-c", "echo $$; sleep 0.2"]);
    assert.equal(slow.pid, Number(slow.stdoutText));
    assert.ok(slow.processUsec >= 200_000, `processUsec ${slow.processUsec}`); // the init's fork to reaping
    assert.equal(slow.oomKilled, false);
  });

  test("delete in the background: gone at once", async () => {
    const doomed = await Sandbox.create({ image: IMAGE, labels: LABELS });
    await doomed.exec(["sh", "-c", "trap '' TERM; sleep 60 >/dev/null 2>&1 &"]);
    await doomed.delete({ timeout: 5, background: true });
    await assert.rejects(Sandbox.connect(doomed.id), boxd.NotFound);
  });

  test("non-UTF-8 output bytes are exact", async () => {
    const r = await sb.exec(["sh", "-c", String.raw`printf '\377\376\000a'; printf '\300' >&2`]);
    assert.deepEqual(r.stdout, new Uint8Array([0xff, 0xfe, 0x00, 0x61]));
    assert.deepEqual(r.stderr, new Uint8Array([0xc0]));
    assert.equal(r.stdoutText, "\ufffd\ufffd\u0000a");
    // The same bytes through the streaming path, and through a callback.
    const parts: Uint8Array[] = [];
    for await (const o of sb.execStream(["sh", "-c", String.raw`printf '\377\376\000a'`])) parts.push(o.data);
    assert.deepEqual(Buffer.concat(parts), Buffer.from([0xff, 0xfe, 0x00, 0x61]));
    const cb: Uint8Array[] = [];
    await sb.exec(["sh", "-c", String.raw`printf '\377\200'`], { onStdout: (d) => void cb.push(d) });
    assert.deepEqual(Buffer.concat(cb), Buffer.from([0xff, 0x80]));
  });

  test("timeout kills the command: timedOut, exit 124", async () => {
    const t = Date.now();
    const r = await sb.exec(["sh", "-c", "echo started; sleep 30"], { timeout: 0.5 });
    assert.ok(Date.now() - t < 10000);
    assert.equal(r.timedOut, true);
    assert.equal(r.exitCode, 124);
    assert.deepEqual(r.stdout, bytes("started\n"));
    assert.ok(!(await ps(sb)).includes("sleep 30"));
  });

  test("a call timeout cancels the server-side work", async () => {
    const t = Date.now();
    await assert.rejects(sb.exec(["sh", "-c", "sleep 31"], { requestTimeoutMs: 1000 }), boxd.DeadlineExceeded);
    assert.ok(Date.now() - t < 5000, "the call must end at its timeout");
    assert.ok(await until(async () => !(await ps(sb)).includes("sleep 31")), "boxd must kill the command");
    // The streaming path too.
    await assert.rejects(sb.exec(["sh", "-c", "sleep 32"], { stdin: [bytes("x")], requestTimeoutMs: 1000 }), boxd.DeadlineExceeded);
    assert.ok(await until(async () => !(await ps(sb)).includes("sleep 32")));
    // An AbortSignal.
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 500);
    await assert.rejects(sb.exec(["sh", "-c", "sleep 33"], { signal: ac.signal }), boxd.Cancelled);
    assert.ok(await until(async () => !(await ps(sb)).includes("sleep 33")));
    await assert.rejects(sb.exec(["true"], { signal: AbortSignal.abort() }), boxd.Cancelled);
    // A client-wide default.
    const c = new boxd.Client({ requestTimeoutMs: 500 });
    const sb2 = await Sandbox.connect(sb.id, { client: c });
    await assert.rejects(sb2.exec(["sleep", "34"]), boxd.DeadlineExceeded);
    assert.ok(await until(async () => !(await ps(sb)).includes("sleep 34")));
    c.close();
  });

  test("output limit: truncated", async () => {
    const r = await sb.exec(["sh", "-c", "head -c 100000 /dev/zero"], { outputLimit: 1000 });
    assert.equal(r.truncated, true);
    assert.ok(r.stdout.length <= 1000);
  });

  test("env, workdir, user", async () => {
    const r = await sb.exec(["sh", "-c", "echo $A; pwd"], { env: { A: "1" }, workdir: "/tmp" });
    assert.deepEqual(r.stdout, bytes("1\n/tmp\n"));
    assert.equal((await sb.exec(["id", "-u"], { user: "65534" })).stdoutText, "65534\n");
    assert.equal((await sb.exec(["sh", "-c", "echo $B"], { env: ["B=2"] })).stdoutText, "2\n");
  });

  test("unknown sandbox: NotFound on every path", async () => {
    const ghost = new Sandbox({ ...(await sb.info()), id: "nosuchsandbox" }, sb.client);
    await assert.rejects(ghost.exec(["true"]), boxd.NotFound);
    await assert.rejects(ghost.execStream(["true"]).wait(), boxd.NotFound);
    await assert.rejects(ghost.files.read("/etc/passwd"), boxd.NotFound);
  });

  test("stdin: bytes, text, a stream of bytes", async () => {
    assert.deepEqual((await sb.exec(["cat"], { stdin: bytes("abc") })).stdout, bytes("abc"));
    assert.equal((await sb.exec(["cat"], { stdin: "é" })).stdoutText, "é");
    const big = randomBytes(3 << 20);
    async function* pieces(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < big.length; i += 65536) yield big.subarray(i, i + 65536);
    }
    const r = await sb.exec(["sh", "-c", "cat | md5sum"], { stdin: pieces() });
    assert.equal(r.stdoutText.split(" ")[0], createHash("md5").update(big).digest("hex"));
    // A Node Readable is an async iterable of bytes.
    const { Readable } = await import("node:stream");
    const r2 = await sb.exec(["wc", "-c"], { stdin: Readable.from([Buffer.from("12345"), Buffer.from("678")]) });
    assert.equal(r2.stdoutText.trim(), "8");
  });

  test("callbacks get output as it arrives", async () => {
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    const r = await sb.exec(["sh", "-c", "echo a; echo b >&2; echo c"], { onStdout: (d) => void out.push(d), onStderr: (d) => void err.push(d) });
    assert.equal(Buffer.concat(out).toString(), "a\nc\n");
    assert.equal(Buffer.concat(err).toString(), "b\n");
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout.length, 0); // given to the callback, not kept
  });

  test("streaming exec as an async iterator", async () => {
    const t0 = Date.now();
    const times: number[] = [];
    const got: [string, string][] = [];
    const ex = sb.execStream(["sh", "-c", "echo one; sleep 1; echo two >&2; exit 5"]);
    for await (const o of ex) {
      got.push([o.stream, Buffer.from(o.data).toString()]);
      times.push(Date.now() - t0);
    }
    assert.deepEqual(got, [
      ["stdout", "one\n"],
      ["stderr", "two\n"],
    ]);
    assert.ok(times[0] < 900, "the first line must arrive before the command ends");
    assert.equal(ex.result?.exitCode, 5);
  });

  test("pipe stdin, and signals", async () => {
    {
      const ex = sb.execStream(["sh", "-c", "read x; echo got $x; cat"], { stdin: boxd.PIPE });
      ex.write(bytes("hello\n"));
      const it = ex[Symbol.asyncIterator]();
      assert.equal(Buffer.from((await it.next()).value!.data).toString(), "got hello\n");
      ex.write("more\n");
      assert.equal(Buffer.from((await it.next()).value!.data).toString(), "more\n");
      ex.closeStdin();
      assert.equal((await it.next()).done, true);
      assert.equal(ex.result?.exitCode, 0);
    }
    {
      const ex = sb.execStream(["sh", "-c", "trap 'echo int; exit 7' INT; echo ready; while :; do sleep 0.1; done"], { stdin: boxd.PIPE });
      const it = ex[Symbol.asyncIterator]();
      assert.equal(Buffer.from((await it.next()).value!.data).toString(), "ready\n");
      ex.signal("SIGINT");
      const rest: Uint8Array[] = [];
      for (let n = await it.next(); !n.done; n = await it.next()) rest.push(n.value.data);
      assert.equal(Buffer.concat(rest).toString(), "int\n");
      assert.equal(ex.result?.exitCode, 7);
    }
  });

  test("a terminal: tty and resize", async () => {
    const ex = sb.execStream(["sh", "-c", "stty size; read x; stty size"], { tty: true, stdin: boxd.PIPE });
    const it = ex[Symbol.asyncIterator]();
    let seen = "";
    while (!seen.includes("24 80")) seen += Buffer.from((await it.next()).value!.data).toString();
    ex.resize(40, 100);
    ex.write("\n");
    while (!seen.includes("40 100")) {
      const n = await it.next();
      if (n.done) break;
      seen += Buffer.from(n.value.data).toString();
    }
    assert.match(seen, /40 100/);
    ex.cancel();
  });

  test("leaving the loop early kills the command", async () => {
    for await (const o of sb.execStream(["sh", "-c", "echo up; sleep 35"])) {
      assert.equal(Buffer.from(o.data).toString(), "up\n");
      break;
    }
    assert.ok(await until(async () => !(await ps(sb)).includes("sleep 35")), "the command must be killed");
    {
      await using ex = sb.execStream(["sh", "-c", "echo up; sleep 36"]);
      await ex[Symbol.asyncIterator]().next();
    }
    assert.ok(await until(async () => !(await ps(sb)).includes("sleep 36")), "await using must kill the command");
  });

  test("exec over kept HTTP/1.1 connections: big output exact, reused, HTTP/2 when all are busy", async () => {
    const c = new boxd.Client();
    try {
      const sb2 = await Sandbox.connect(sb.id, { client: c });
      // 3 MB of random bytes: a chunked answer arriving in many reads.
      const r = await sb2.exec(["sh", "-c", "head -c 3000000 /dev/urandom >/tmp/big; sha256sum /tmp/big >&2; cat /tmp/big; rm /tmp/big"]);
      assert.equal(r.exitCode, 0, r.stderrText);
      assert.equal(r.stdout.length, 3000000);
      assert.equal(r.stderrText.split(" ")[0], createHash("sha256").update(r.stdout).digest("hex"));
      assert.equal(c.http1.connections(), 1);
      for (let i = 0; i < 5; i++) assert.ok((await sb2.exec(["true"])).ok);
      assert.equal(c.http1.connections(), 1, "calls one after another reuse one connection");
      // More calls at once than connections: the others go over HTTP/2.
      const n = MAX_CONNS * 3;
      const rs = await Promise.all([...Array(n).keys()].map((i) => sb2.exec(["sh", "-c", `sleep 0.3; echo ${i}`])));
      assert.deepEqual(
        rs.map((x) => x.stdoutText),
        [...Array(n).keys()].map((i) => `${i}\n`),
      );
      assert.equal(c.http1.connections(), MAX_CONNS);
      // Errors come back typed from the JSON answer, naming the field.
      const err = await sb2.exec(["true"], { workdir: "rel" }).catch((e: unknown) => e);
      assert.ok(err instanceof boxd.InvalidArgument, String(err));
      assert.equal(err.field, "workdir", err.message);
      c.close();
      assert.equal(c.http1.connections(), 0);
      assert.ok((await sb2.exec(["true"])).ok, "a call after close() opens a new connection");
      assert.deepEqual(c.openStreams(), []);
    } finally {
      c.close();
    }
  });

  test("concurrent execs on one connection", async () => {
    const rs = await Promise.all([...Array(8).keys()].map((i) => sb.exec(["sh", "-c", `echo ${i}`])));
    assert.deepEqual(
      rs.map((r) => r.stdoutText),
      [...Array(8).keys()].map((i) => `${i}\n`),
    );
  });
});
