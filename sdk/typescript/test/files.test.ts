// sb.files against a real boxd.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import * as boxd from "../src/index.js";
import type { Sandbox, WatchEvent } from "../src/index.js";
import { bytes, sandbox } from "./support.js";

describe("files", () => {
  let sb: Sandbox;
  before(async () => {
    sb = await sandbox();
  });
  after(async () => {
    await sb.delete();
  });

  test("write and read bytes and text", async () => {
    const f = sb.files;
    const info = await f.write("/workspace/main.py", bytes("print(1)"));
    assert.equal(info.size, 8);
    assert.equal(info.mode, 0o644);
    assert.deepEqual(await f.read("/workspace/main.py"), bytes("print(1)"));
    assert.deepEqual((await sb.exec(["cat", "main.py"])).stdout, bytes("print(1)")); // relative to the workdir
    await f.writeText("t.txt", "héllo\n");
    assert.equal(await f.readText("t.txt"), "héllo\n");
    assert.deepEqual(await f.read("t.txt", { offset: 1, length: 2 }), bytes("é"));
    await f.write("t.txt", "more\n", { append: true });
    assert.equal(await f.readText("t.txt"), "héllo\nmore\n");
    await assert.rejects(f.write("t.txt", "x", { exclusive: true }), boxd.AlreadyExists);
    await f.write("/workspace/bin/run.sh", "#!/bin/sh\necho ran\n", { mode: 0o755, parents: true });
    assert.equal((await sb.exec(["/workspace/bin/run.sh"])).stdoutText, "ran\n");
    assert.equal((await f.write("empty", new Uint8Array(0))).size, 0);
    assert.equal((await f.read("empty")).length, 0);
    await f.write("/tmp/bin.dat", new Uint8Array([0xff, 0, 0xfe]));
    assert.deepEqual(await f.read("/tmp/bin.dat"), new Uint8Array([0xff, 0, 0xfe]));
    await assert.rejects(f.readText("/tmp/bin.dat"), TypeError);
  });

  test("streams: write from an iterable or a Readable, read in pieces", async () => {
    const data = randomBytes((5 << 20) + 123);
    await sb.files.write("/tmp/big", Readable.from([data.subarray(0, 1000), data.subarray(1000)]));
    assert.ok(Buffer.from(await sb.files.read("/tmp/big")).equals(data));
    function* gen(): Generator<Uint8Array> {
      for (let i = 0; i < data.length; i += 300000) yield data.subarray(i, i + 300000);
    }
    await sb.files.write("/tmp/big2", gen());
    assert.equal((await sb.exec(["md5sum", "/tmp/big2"])).stdoutText.split(" ")[0], createHash("md5").update(data).digest("hex"));
    const pieces: Uint8Array[] = [];
    for await (const p of sb.files.readStream("/tmp/big2")) pieces.push(p);
    assert.ok(pieces.length > 1);
    assert.ok(Buffer.concat(pieces).equals(data));
    // Leaving the loop early cancels the read.
    for await (const p of sb.files.readStream("/tmp/big2")) {
      assert.ok(p.length > 0);
      break;
    }
  });

  test("errors are typed", async () => {
    const f = sb.files;
    await assert.rejects(f.read("/no/such/file"), boxd.NotFound);
    await assert.rejects(f.write("/no/such/dir/f", "x"), boxd.NotFound);
    await assert.rejects(f.read("/tmp/a\u0000b"), boxd.InvalidArgument);
    await assert.rejects(f.read("/tmp"), boxd.FailedPrecondition);
    await f.mkdir("/tmp/full/sub", { parents: true });
    await assert.rejects(f.rm("/tmp/full"), boxd.FailedPrecondition);
    await f.write("/tmp/secret", "s", { mode: 0o600 });
    await assert.rejects(f.read("/tmp/secret", { user: "65534" }), boxd.PermissionDenied);
    await assert.rejects(f.write("/tmp/x", "x", { mode: 0o177777 }), boxd.InvalidArgument);
  });

  test("stat, list, mkdir, chmod, mv, rm", async () => {
    const f = sb.files;
    await f.mkdir("/tmp/d");
    await f.mkdir("/tmp/d/a/b", { parents: true, mode: 0o700 });
    assert.equal((await f.stat("/tmp/d/a/b")).mode, 0o700);
    assert.ok((await f.stat("/tmp/d")).isDir);
    await f.write("/tmp/d/x.txt", "12345");
    const st = await f.stat("/tmp/d/x.txt");
    assert.deepEqual([st.type, st.size, st.path, st.name, st.isFile], ["file", 5, "/tmp/d/x.txt", "x.txt", true]);
    assert.deepEqual(
      (await f.list("/tmp/d")).map((e) => e.path),
      ["a", "x.txt"],
    );
    assert.deepEqual(
      (await f.list("/tmp/d", { depth: -1 })).map((e) => e.path),
      ["a", "a/b", "x.txt"],
    );
    await f.chmod("/tmp/d/x.txt", 0o640);
    assert.equal((await f.stat("/tmp/d/x.txt")).mode, 0o640);
    await f.mv("/tmp/d/x.txt", "/tmp/d/y.txt");
    assert.equal(await f.exists("/tmp/d/x.txt"), false);
    assert.equal(await f.exists("/tmp/d/y.txt"), true);
    await f.write("/tmp/d/z.txt", "z");
    await assert.rejects(f.mv("/tmp/d/y.txt", "/tmp/d/z.txt", { noOverwrite: true }), boxd.AlreadyExists);
    await sb.exec(["ln", "-s", "y.txt", "/tmp/d/link"]);
    assert.equal((await f.stat("/tmp/d/link")).type, "symlink");
    assert.equal((await f.stat("/tmp/d/link")).linkTarget, "y.txt");
    assert.equal((await f.stat("/tmp/d/link", { follow: true })).type, "file");
    await f.rm("/tmp/d/z.txt");
    await f.rm("/tmp/d", { recursive: true });
    assert.equal(await f.exists("/tmp/d"), false);
  });

  test("upload and download many, with per-file results", async () => {
    const f = sb.files;
    const big = randomBytes(3 << 20);
    const items: boxd.UploadItem[] = [
      ["/tmp/up/a.txt", "a"],
      ["/tmp/up/big.bin", big],
      ["/tmp/up/run.sh", "#!/bin/sh\n", 0o755],
      ["/no/such/dir/x", "x"],
      { path: "/tmp/up/c.txt", data: bytes("c") },
    ];
    let res = await f.upload(items);
    // No parents: the first file fails as /tmp/up is missing.
    assert.equal(res.ok, false);
    assert.ok(res.results[0].error instanceof boxd.NotFound);
    await f.mkdir("/tmp/up");
    res = await f.upload(items);
    assert.deepEqual(
      res.results.map((r) => r.ok),
      [true, true, true, false, true],
    );
    assert.ok(res.results[3].error instanceof boxd.NotFound);
    assert.deepEqual(
      res.failed.map((r) => r.path),
      ["/no/such/dir/x"],
    );
    assert.equal(res.results[1].size, big.length);
    assert.equal(res.filesWritten, 4);
    assert.equal((await f.stat("/tmp/up/run.sh")).mode, 0o755);
    res = await f.upload({ "/tmp/up2/q/one": "1", "/tmp/up2/two": bytes("2") }, { parents: true });
    assert.ok(res.ok);
    assert.equal(res.bytesWritten, 2);

    const got = await f.download(["/tmp/up/a.txt", "/tmp/up/missing", "/tmp/up/big.bin", "/tmp/up"]);
    assert.deepEqual(
      got.map((g) => g.ok),
      [true, false, true, false],
    );
    assert.deepEqual(got[0].data, bytes("a"));
    assert.ok(Buffer.from(got[2].data).equals(big));
    assert.equal(got[2].info?.size, big.length);
    assert.ok(got[1].error instanceof boxd.NotFound);
    assert.ok(got[3].error instanceof boxd.FailedPrecondition);
  });

  test("too many files: ResourceExhausted", async () => {
    const many: boxd.UploadItem[] = [];
    for (let i = 0; i < 10001; i++) many.push([`/tmp/many/${i}`, ""]);
    await assert.rejects(sb.files.upload(many, { parents: true }), boxd.ResourceExhausted);
  });

  test("watch", async () => {
    const f = sb.files;
    await f.mkdir("/tmp/w/sub", { parents: true });
    const w = await f.watch("/tmp/w", { recursive: true });
    await f.write("/tmp/w/sub/new.txt", "x");
    await f.rm("/tmp/w/sub/new.txt");
    const events: [string, string][] = [];
    for await (const e of w as AsyncIterable<WatchEvent>) {
      events.push([e.op, e.path]);
      if (e.op === "remove") break;
    }
    assert.ok(events.some(([op, p]) => op === "remove" && p === "/tmp/w/sub/new.txt"), JSON.stringify(events));
    assert.ok(
      events.some(([op, p]) => p.startsWith("/tmp/w/sub/") && (op === "create" || op === "rename")),
      JSON.stringify(events),
    );
    await assert.rejects(f.watch("/tmp/no-such-dir"), boxd.NotFound);
  });

  test("1 GiB streams through in bounded memory", async () => {
    const block = randomBytes(1 << 20);
    const want = createHash("md5");
    async function* gen(): AsyncGenerator<Uint8Array> {
      for (let i = 0; i < 1024; i++) {
        const b = Buffer.from(block);
        b.writeUInt32LE(i, 0);
        want.update(b);
        yield b;
      }
    }
    const info = await sb.files.write("/workspace/gib", gen());
    assert.equal(info.size, 1 << 30);
    const digest = want.digest("hex");
    assert.equal((await sb.exec(["md5sum", "/workspace/gib"])).stdoutText.split(" ")[0], digest);
    const got = createHash("md5");
    let n = 0;
    let peak = 0;
    for await (const piece of sb.files.readStream("/workspace/gib")) {
      got.update(piece);
      n += piece.length;
      if ((n & ((64 << 20) - 1)) === 0) peak = Math.max(peak, process.memoryUsage().rss);
    }
    assert.deepEqual([n, got.digest("hex")], [1 << 30, digest]);
    await sb.files.rm("/workspace/gib");
    assert.ok(peak < 400 << 20, `1 GiB through the SDK must not be held in memory (rss ${peak >> 20} MiB)`);
  });
});
