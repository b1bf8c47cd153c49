// Images (import, list, remove, build), commit, fork, published ports,
// network updates, tar copies, the one-way ExecStream, warm-pool sizes and
// the agent file helpers (readLines, edit, glob, grep, chown), against a
// real boxd. Pull and push run against a real registry in
// test/registry_client.ts (e2e TestSDKRegistry).

import assert from "node:assert/strict";
import * as http from "node:http";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import * as boxd from "../src/index.js";
import { IMAGE, LABELS, bytes, ps, sandbox, until } from "./support.js";

/** A ustar archive of regular files (0644). */
export function tarOf(files: Record<string, string | Uint8Array>): Uint8Array {
  const parts: Buffer[] = [];
  for (const [name, data] of Object.entries(files)) {
    const body = Buffer.from(typeof data === "string" ? bytes(data) : data);
    const h = Buffer.alloc(512);
    h.write(name, 0, 100, "utf8");
    h.write("0000644\0", 100);
    h.write("0000000\0", 108);
    h.write("0000000\0", 116);
    h.write(body.length.toString(8).padStart(11, "0") + "\0", 124);
    h.write(Math.floor(Date.now() / 1000).toString(8).padStart(11, "0") + "\0", 136);
    h.write("        ", 148);
    h.write("0", 156);
    h.write("ustar\0" + "00", 257, "binary");
    let sum = 0;
    for (const b of h) sum += b;
    h.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    parts.push(h, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

/** The regular files of a tar (ustar, with PAX path records). */
export function untar(tar: Uint8Array): Record<string, string> {
  const b = Buffer.from(tar);
  const out: Record<string, string> = {};
  let pax: string | undefined;
  for (let off = 0; off + 512 <= b.length; ) {
    const h = b.subarray(off, off + 512);
    if (h.every((x) => x === 0)) break;
    const cstr = (s: number, n: number) => h.subarray(s, s + n).toString("utf8").replace(/\0.*$/s, "");
    const size = parseInt(cstr(124, 12).trim() || "0", 8);
    const type = String.fromCharCode(h[156] || 48);
    const prefix = cstr(345, 155);
    const name = pax ?? (prefix ? prefix + "/" : "") + cstr(0, 100);
    const body = b.subarray(off + 512, off + 512 + size);
    pax = undefined;
    if (type === "x") {
      const m = /\d+ path=([^\n]*)\n/.exec(body.toString("utf8"));
      pax = m?.[1];
    } else if (type === "0") out[name] = body.toString("utf8");
    off += 512 + Math.ceil(size / 512) * 512;
  }
  return out;
}

const unique = (p: string) => `sdk-ts/${p}-${randomBytes(4).toString("hex")}:v1`;

describe("images", () => {
  test("import, list, remove", async () => {
    const ref = unique("rootfs");
    const rootfs = tarOf({ "hello.txt": "hi from a rootfs\n" });
    const imgs = await boxd.images.importImage([rootfs], { name: ref, rootfs: true });
    assert.deepEqual(imgs.map((i) => i.name), [ref]);
    assert.match(imgs[0].digest, /^sha256:/);
    const listed = (await boxd.images.list()).find((i) => i.name === ref);
    assert.equal(listed?.digest, imgs[0].digest);
    assert.match(listed?.labels["boxd.io/imported-by"] ?? "", /^uid=/);
    await assert.rejects(boxd.images.importImage(rootfs, { name: ref, rootfs: true }), boxd.AlreadyExists);
    const again = await boxd.images.importImage(tarOf({ "other.txt": "2" }), { name: ref, rootfs: true, force: true });
    assert.notEqual(again[0].digest, imgs[0].digest);
    await assert.rejects(boxd.images.importImage(rootfs, { rootfs: true }), boxd.InvalidArgument);
    await boxd.images.remove(ref);
    assert.ok(!(await boxd.images.list()).some((i) => i.name === ref));
    await assert.rejects(boxd.images.remove(ref), boxd.NotFound);
  });

  test("build from a Dockerfile and a context", async () => {
    let base: string;
    {
      await using sb = await sandbox();
      base = (await sb.info()).image;
    }
    const ref = unique("built");
    const dockerfile = `FROM ${base}\nCOPY greet.txt /greet.txt\nRUN cat /greet.txt /greet.txt > /built.txt\n`;
    const context = tarOf({ "greet.txt": "hello\n" });
    const r = await boxd.images.build(ref, dockerfile, { context, requestTimeoutMs: 120_000 });
    try {
      assert.equal(r.image.name, ref);
      assert.deepEqual(r.steps.map((s) => [s.line, s.instruction.split(" ")[0]]), [[2, "COPY"], [3, "RUN"]]);
      {
        await using sb = await boxd.Sandbox.create({ image: ref, memory: "256m", ttl: "10m", labels: LABELS });
        assert.equal(await sb.files.readText("/built.txt"), "hello\nhello\n");
      }
      await assert.rejects(boxd.images.build(ref, dockerfile, { context }), boxd.AlreadyExists);
      const r2 = await boxd.images.build(ref, dockerfile, { context, force: true, requestTimeoutMs: 120_000 });
      assert.deepEqual(r2.steps.map((s) => s.cached), [true, true]);
      await assert.rejects(boxd.images.build(unique("fails"), `FROM ${base}\nRUN exit 3\n`, { requestTimeoutMs: 120_000 }), boxd.FailedPrecondition);
      await assert.rejects(boxd.images.build(unique("bad"), `FROM ${base}\nFROBNICATE x\n`), boxd.InvalidArgument);
    } finally {
      await boxd.images.remove(ref, { force: true });
    }
  });

  test("warm-pool sizes", async () => {
    const pools = await boxd.images.poolSizes();
    assert.ok(Array.isArray(pools));
    await using sb = await sandbox();
    const base = (await sb.info()).image;
    const size = pools.find((p) => p.image === base)?.size ?? 0;
    const set = await boxd.images.setPoolSize(base, size);
    assert.deepEqual([set.size, set.runtime], [size, "runc"]);
    assert.equal((await boxd.images.setPoolSize(base, size, { runtime: "runc" })).runtime, "runc");
    await assert.rejects(boxd.images.setPoolSize(base, 0, { runtime: "no-such-runtime" }), boxd.InvalidArgument);
    await assert.rejects(boxd.images.setPoolSize(base, -1), boxd.InvalidArgument);
    await assert.rejects(boxd.images.setPoolSize("sdk-ts/no-such-image:v1", 1), boxd.NotFound);
  });
});

describe("sandbox extras", () => {
  let sb: boxd.Sandbox;
  before(async () => {
    sb = await sandbox();
  });
  after(async () => {
    await sb.delete();
  });

  test("commit", async () => {
    await sb.files.write("/workspace/committed.txt", "in the image");
    const ref = unique("commit");
    const img = await sb.commit(ref, { message: "sdk test" });
    try {
      assert.equal(img.name, ref);
      assert.equal((await sb.exec(["true"])).exitCode, 0);
      {
        await using sb2 = await boxd.Sandbox.create({ image: ref, memory: "256m", ttl: "10m", labels: LABELS });
        assert.equal(await sb2.files.readText("/workspace/committed.txt"), "in the image");
      }
      await assert.rejects(sb.commit(ref), boxd.AlreadyExists);
      await assert.rejects(sb.commit("Bad Ref!"), (e: unknown) => e instanceof boxd.InvalidArgument && /ref/.test(e.message));
    } finally {
      await boxd.images.remove(ref, { force: true });
    }
  });

  test("fork", async () => {
    await sb.files.write("/workspace/forked.txt", "copied");
    const forks = await sb.fork({ count: 2, labels: { fork: "yes" } });
    try {
      assert.equal(forks.length, 2);
      for (const f of forks) {
        assert.notEqual(f.id, sb.id);
        assert.equal(await f.files.readText("/workspace/forked.txt"), "copied");
        assert.equal((await f.info()).labels.fork, "yes");
      }
      await forks[0].files.write("/workspace/forked.txt", "changed");
      assert.equal(await forks[1].files.readText("/workspace/forked.txt"), "copied");
      assert.equal(await sb.files.readText("/workspace/forked.txt"), "copied");
      await assert.rejects(sb.fork({ count: 1000 }), boxd.InvalidArgument);
    } finally {
      for (const f of forks) await f.delete();
    }
    await assert.rejects(boxd.Sandbox.connect(forks[0].id), boxd.NotFound);
  });

  test("publish and unpublish a port", async () => {
    await sb.files.write("/workspace/www/index.html", "served from the sandbox\n", { parents: true });
    const proc = await sb.processes.start(["busybox", "httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/workspace/www"]);
    try {
      const p = await sb.publishPort(8080);
      assert.deepEqual([p.hostIp, p.port, p.protocol], ["127.0.0.1", 8080, "tcp"]);
      assert.ok(p.hostPort > 0);
      assert.deepEqual(await sb.ports(), [p]);
      const get = () =>
        new Promise<string>((resolve, reject) => {
          const req = http.get({ host: "127.0.0.1", port: p.hostPort, path: "/index.html", agent: false }, (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (d) => (body += d));
            res.on("end", () => resolve(body));
          });
          req.on("error", reject);
        });
      let body = "";
      assert.ok(
        await until(async () => {
          body = await get().catch(() => "");
          return body !== "";
        }, 20_000),
        "httpd never answered through the published port",
      );
      assert.equal(body, "served from the sandbox\n");
      assert.deepEqual(await sb.unpublishPort(8080), [p]);
      assert.deepEqual(await sb.ports(), []);
      await assert.rejects(sb.unpublishPort(8080), boxd.NotFound);
      await assert.rejects(sb.publishPort(70000), (e: unknown) => e instanceof boxd.InvalidArgument && /port/.test(e.message));
    } finally {
      await sb.processes.kill(proc.id);
    }
  });

  test("network update of a sandbox without network is refused", async () => {
    await assert.rejects(sb.updateNetwork({ allow: ["10.0.0.1:80"] }), (e: unknown) => e instanceof boxd.FailedPrecondition && /none/.test(e.message));
    await assert.rejects(sb.updateNetwork({ allow: ["not a host!"] }), (e: unknown) => e instanceof boxd.InvalidArgument && e.field === "allow");
  });

  test("tar copies in and out", async () => {
    const big = "A".repeat(3_000_000);
    await sb.copyIn("/workspace", tarOf({ "cp/a.txt": big, "cp/sub/b.txt": "B" }));
    assert.equal(await sb.files.readText("/workspace/cp/sub/b.txt"), "B");
    const st = await sb.statPath("/workspace/cp/a.txt");
    assert.deepEqual([st.name, st.size, st.isDir], ["a.txt", 3_000_000, false]);
    assert.ok((await sb.statPath("/workspace/cp")).isDir);
    const got = untar(await sb.copyOut("/workspace/cp"));
    assert.equal(got["cp/a.txt"], big);
    assert.equal(got["cp/sub/b.txt"], "B");
    await assert.rejects(sb.copyOut("/workspace/no-such"), boxd.NotFound);
    await assert.rejects(sb.statPath("/workspace/no-such"), boxd.NotFound);
  });

  test("one-way exec stream", async () => {
    const st = sb.execOutput(["sh", "-c", "echo out; echo err >&2; cat; exit 5"], { stdin: "in\n" });
    const r = await st.wait();
    assert.deepEqual([r.exitCode, r.stdoutText, r.stderrText], [5, "out\nin\n", "err\n"]);
    const t = await sb.execOutput(["sh", "-c", "sleep 5"], { timeout: 0.3 }).wait();
    assert.deepEqual([t.timedOut, t.exitCode], [true, 124]);
    for await (const o of sb.execOutput(["sh", "-c", "echo started; sleep 60"])) {
      assert.equal(Buffer.from(o.data).toString(), "started\n");
      break; // leaving the loop kills the command
    }
    assert.ok(await until(async () => !(await ps(sb)).includes("sleep 60"), 10_000), await ps(sb));
    const gone = new boxd.Sandbox({ ...(await sb.info()), id: "nope" }, sb.client);
    await assert.rejects(gone.execOutput(["true"]).wait(), boxd.NotFound);
  });

  test("agent file helpers: readLines, edit, glob, grep, chown", async () => {
    await sb.files.write("/workspace/h/a.py", "one\ntwo\nthree\n", { parents: true });
    await sb.files.write("/workspace/h/sub/b.py", "TWO again\n", { parents: true });
    const ls = await sb.files.readLines("/workspace/h/a.py", { offset: 1, limit: 1 });
    assert.deepEqual(ls.lines, [{ number: 2, text: "two", cut: false }]);
    assert.equal(ls.more, true);
    assert.equal(ls.nextOffset, 2);
    assert.equal(ls.numbered(), "     2\ttwo\n");
    const ed = await sb.files.edit("/workspace/h/a.py", "three", "3");
    assert.deepEqual([ed.replacements, ed.line], [1, 3]);
    assert.equal(await sb.files.readText("/workspace/h/a.py"), "one\ntwo\n3\n");
    await assert.rejects(sb.files.edit("/workspace/h/a.py", "missing", "x"), boxd.FailedPrecondition);
    const g = await sb.files.glob("**/*.py", { path: "/workspace/h" });
    assert.deepEqual(g.matches.map((m) => m.path).sort(), ["/workspace/h/a.py", "/workspace/h/sub/b.py"]);
    assert.equal(g.truncated, false);
    const gr = await sb.files.grep("two", { path: "/workspace/h", ignoreCase: true });
    assert.deepEqual(
      gr.matches.map((m) => [m.path, m.line, m.text]).sort(),
      [
        ["/workspace/h/a.py", 2, "two"],
        ["/workspace/h/sub/b.py", 1, "TWO again"],
      ],
    );
    assert.equal((await sb.files.grep("two", { path: "/workspace/h", limit: 1, ignoreCase: true })).truncated, true);
    await assert.rejects(sb.files.grep("(", { path: "/workspace/h" }), boxd.InvalidArgument);
    await sb.files.chown("/workspace/h", "1000:1000", { recursive: true });
    const info = await sb.files.stat("/workspace/h/sub/b.py");
    assert.deepEqual([info.uid, info.gid], [1000, 1000]);
    await assert.rejects(sb.files.chown("/workspace/h", "no-such-user"), boxd.InvalidArgument);
  });
});

test("create with publish", async () => {
  await using sb = await boxd.Sandbox.create({ image: IMAGE, memory: "256m", ttl: "10m", labels: LABELS, publish: [8081] });
  const ports = await sb.ports();
  assert.deepEqual(ports.map((p) => p.port), [8081]);
  assert.ok(ports[0].hostPort > 0);
});
