// Data larger than one message: boxd takes no message over 8 MiB
// (rpc.MaxMessageBytes), so the SDK sends stdin and file data in pieces.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Sandbox } from "../src/index.js";
import { sandbox } from "./support.js";

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe("chunking", () => {
  let sb: Sandbox;
  before(async () => {
    sb = await sandbox();
  });
  after(async () => {
    await sb.delete();
  });

  test("exec with 50 MiB of stdin", async () => {
    const data = new Uint8Array(randomBytes(50 << 20));
    const r = await sb.exec(["sha256sum"], { stdin: data, timeout: 120 });
    assert.equal(r.exitCode, 0, r.stderrText);
    assert.equal(r.stdoutText.split(" ")[0], sha256(data));
    // a view into a larger buffer, through execStream
    const view = data.subarray(1);
    const parts: Uint8Array[] = [];
    for await (const o of sb.execStream(["wc", "-c"], { stdin: view })) parts.push(o.data);
    assert.equal(Buffer.concat(parts).toString().trim(), String(view.length));
    // text
    const text = "é".repeat(5 << 20);
    assert.equal((await sb.exec(["wc", "-c"], { stdin: text })).stdoutText.trim(), String(Buffer.byteLength(text)));
  });

  test("execStream with stdin over 64 KiB", async () => {
    // over boxd's inline stdin (64 KiB): whole and in order, every time (in
    // the start message, it raced the stream's end)
    const data = new Uint8Array(randomBytes(7 << 20));
    for (const size of [100 << 10, 1 << 20, (1 << 20) + 1, 7 << 20, 100 << 10, 1 << 20, 7 << 20]) {
      const out: Uint8Array[] = [];
      for await (const o of sb.execStream(["sha256sum"], { stdin: data.subarray(0, size) })) out.push(o.data);
      assert.equal(Buffer.concat(out).toString().split(" ")[0], sha256(data.subarray(0, size)), String(size));
    }
  });

  test("write and read 9 MiB", async () => {
    const data = new Uint8Array(randomBytes(9 << 20));
    assert.equal((await sb.files.write("/tmp/nine", data)).size, data.length);
    assert.equal((await sb.exec(["sha256sum", "/tmp/nine"])).stdoutText.split(" ")[0], sha256(data));
    const back = await sb.files.read("/tmp/nine");
    assert.equal(back.length, data.length);
    assert.equal(sha256(back), sha256(data));
  });
});
