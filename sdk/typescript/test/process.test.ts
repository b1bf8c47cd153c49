// Background processes and sessions against a real boxd.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as boxd from "../src/index.js";
import type { Sandbox } from "../src/index.js";
import { bytes, sandbox, sleep } from "./support.js";

const text = (b: Uint8Array): string => Buffer.from(b).toString();

describe("processes", () => {
  let sb: Sandbox;
  before(async () => {
    sb = await sandbox();
  });
  after(async () => {
    await sb.delete();
  });

  test("start, list, get, wait, attach to an exited process", async () => {
    const p = await sb.processes.start(["sh", "-c", "echo bg; echo e >&2; sleep 0.5; exit 4"]);
    assert.ok(p.id);
    assert.equal(p.state, "running");
    assert.equal(p.running, true);
    assert.ok(p.pid > 0);
    assert.ok((await sb.processes.list()).some((x) => x.id === p.id));
    const done = await sb.processes.wait(p.id, { requestTimeoutMs: 10000 });
    assert.equal(done.state, "exited");
    assert.equal(done.result?.exitCode, 4);
    assert.equal((await sb.processes.get(p.id)).state, "exited");
    const a = await sb.processes.attach(p.id);
    const r = await a.wait();
    assert.equal(a.process?.id, p.id);
    assert.deepEqual([text(r.stdout), text(r.stderr), r.exitCode], ["bg\n", "e\n", 4]);
  });

  test("kill", async () => {
    const p = await sb.processes.start(["sleep", "35"]);
    await sb.processes.kill(p.id);
    const done = await sb.processes.wait(p.id, { requestTimeoutMs: 10000 });
    assert.equal(done.result?.signal, "SIGKILL");
    await assert.rejects(sb.processes.kill(p.id), boxd.FailedPrecondition);
    await assert.rejects(sb.processes.wait("p999999"), boxd.NotFound);
    await assert.rejects(sb.processes.get("p999999"), boxd.NotFound);
  });

  test("attach, follow and write to stdin", async () => {
    const p = await sb.processes.start(["sh", "-c", "echo ready; read x; echo got $x"], { keepStdinOpen: true });
    assert.equal(p.stdinOpen, true);
    const a = await sb.processes.attach(p.id, { stdin: boxd.PIPE });
    const it = a[Symbol.asyncIterator]();
    assert.equal(text((await it.next()).value!.data), "ready\n");
    a.write(bytes("42\n"));
    assert.equal(text((await it.next()).value!.data), "got 42\n");
    assert.equal((await it.next()).done, true);
    assert.equal(a.result?.exitCode, 0);
  });

  test("detaching leaves the process running", async () => {
    const p = await sb.processes.start(["sh", "-c", "echo one; sleep 36"], { stdin: "ignored" });
    await sleep(300);
    const a = await sb.processes.attach(p.id, { follow: false });
    const got: Uint8Array[] = [];
    for await (const o of a) got.push(o.data);
    assert.equal(Buffer.concat(got).toString(), "one\n");
    assert.equal(a.result, undefined);
    await assert.rejects(sb.processes.attach(p.id, { follow: false }).then((x) => x.wait()), boxd.FailedPrecondition);
    const b = await sb.processes.attach(p.id);
    for await (const o of b) {
      assert.equal(text(o.data), "one\n");
      break; // ends the attachment, not the process
    }
    assert.equal((await sb.processes.get(p.id)).state, "running");
    await sb.processes.kill(p.id);
  });

  test("bad input", async () => {
    await assert.rejects(sb.processes.start(["true"], { user: "no-such-user" }), boxd.InvalidArgument);
    await assert.rejects(sb.processes.start([]), TypeError);
    await assert.rejects(sb.processes.attach("p999999"), boxd.NotFound);
  });
});

describe("sessions", () => {
  let sb: Sandbox;
  before(async () => {
    sb = await sandbox();
  });
  after(async () => {
    await sb.delete();
  });

  test("state persists between commands", async () => {
    const s = await sb.sessions.create("work", { env: { X: "1" }, workdir: "/tmp" });
    assert.equal(s.name, "work");
    await s.exec("mkdir -p /tmp/s && cd /tmp/s && export Y=2; f() { echo fn; }");
    const r = await s.exec("pwd; echo $X$Y; f; echo err >&2; false");
    assert.equal(r.stdoutText, "/tmp/s\n12\nfn\n");
    assert.equal(r.stderrText, "err\n");
    assert.equal(r.exitCode, 1);
    assert.ok((await sb.sessions.list()).some((x) => x.name === "work"));
    assert.equal((await sb.sessions.get("work")).info.commands, 2);
    const streamed: Uint8Array[] = [];
    const r2 = await s.exec("echo a; echo b", { onStdout: (d) => void streamed.push(d) });
    assert.equal(Buffer.concat(streamed).toString(), "a\nb\n");
    assert.equal(r2.stdout.length, 0);
    await assert.rejects(sb.sessions.create("work"), boxd.AlreadyExists);
    await s.delete();
    assert.ok(!(await sb.sessions.list()).some((x) => x.name === "work"));
    await assert.rejects(s.exec("true"), boxd.NotFound);
    await assert.rejects(sb.sessions.get("work"), boxd.NotFound);
  });

  test("timeout and end", async () => {
    const s = await sb.sessions.create("t");
    await s.exec("cd /tmp");
    const r = await s.exec("sleep 37", { timeout: 0.5 });
    assert.equal(r.timedOut, true);
    assert.equal(r.exitCode, 124);
    assert.equal(r.sessionRestarted, false);
    assert.equal((await s.exec("pwd")).stdoutText, "/tmp\n");
    const end = await s.exec("exit 3");
    assert.equal(end.sessionEnded, true);
    await assert.rejects(sb.sessions.create("bad name!"), boxd.InvalidArgument);
  });
});
