// Managing a running sandbox: update, stop/start, pause/unpause, stats and
// the event log, against a real boxd.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as boxd from "../src/index.js";
import { sandbox } from "./support.js";

describe("manage", () => {
  test("update: limits, env, workdir, expiry; bad input changes nothing", async () => {
    await using sb = await sandbox();
    const before = (await sb.info()).expiresAt;
    const info = await sb.update({ memory: "300m", pids: 77, env: { UPDATED: "yes" }, workdir: "/tmp", extend: "1h" });
    assert.equal(info.memoryBytes, 300 << 20);
    assert.equal(info.pids, 77);
    assert.ok(info.expiresAt > before, `${info.expiresAt} > ${before}`);
    assert.equal((await sb.exec(["sh", "-c", "echo $UPDATED; pwd"])).stdoutText, "yes\n/tmp\n");
    await assert.rejects(sb.update({ memory: "12xb" }), (e: unknown) => e instanceof boxd.InvalidArgument && /memory/.test(e.field ?? ""));
    await assert.rejects(sb.update({ ttl: "1h", extend: "1h" }), boxd.InvalidArgument);
    assert.equal((await sb.info()).memoryBytes, 300 << 20);
  });

  test("stop and start keep the files", async () => {
    await using sb = await sandbox();
    await sb.files.write("/workspace/kept.txt", "kept");
    assert.equal((await sb.stop(1)).state, "stopped");
    await assert.rejects(sb.exec(["true"]), boxd.FailedPrecondition);
    await assert.rejects(sb.stop(), boxd.FailedPrecondition);
    assert.equal((await sb.start()).state, "running");
    assert.equal(await sb.files.readText("/workspace/kept.txt"), "kept");
    assert.equal((await sb.exec(["echo", "back"])).stdoutText, "back\n");
    await assert.rejects(sb.start(), boxd.FailedPrecondition);
  });

  test("pause, stats, events", async () => {
    const sb = await sandbox();
    try {
      const st = await sb.stats();
      assert.deepEqual([st.id, st.state, st.memoryLimitBytes], [sb.id, "running", 256 << 20]);
      assert.ok((st.usage?.pids ?? 0) > 0);
      const samples: boxd.SandboxStats[] = [];
      for await (const s of sb.statsStream(0.2)) {
        samples.push(s);
        if (samples.length === 2) break;
      }
      assert.deepEqual(samples.map((s) => s.id), [sb.id, sb.id]);

      // A follower sees a pause as it happens.
      const follower = (async () => {
        for await (const ev of boxd.events({ filters: [`sandbox=${sb.id}`, "type=paused"], follow: true })) return ev;
        return undefined;
      })();
      await sb.pause();
      assert.equal((await sb.stats()).state, "paused");
      await assert.rejects(sb.exec(["true"]), boxd.FailedPrecondition);
      await sb.resume();
      assert.equal((await sb.exec(["echo", "thawed"])).stdoutText, "thawed\n");
      // The follower may have subscribed after that pause: pause until it has one.
      let seen: boxd.Event | undefined;
      for (let i = 0; i < 20 && !seen; i++) {
        seen = await Promise.race([follower, new Promise<undefined>((r) => setTimeout(() => r(undefined), 500))]);
        if (!seen) {
          await sb.pause();
          await sb.unpause();
        }
      }
      assert.ok(seen, "the following events stream never saw a pause");
      assert.deepEqual([seen.type, seen.sandbox], ["paused", sb.id]);

      const types: string[] = [];
      const seqs: bigint[] = [];
      for await (const e of boxd.events({ since: "10m", filters: [`sandbox=${sb.id}`] })) {
        types.push(e.type);
        seqs.push(e.seq);
      }
      for (const want of ["created", "paused", "resumed"]) assert.ok(types.includes(want), `${want} in ${types}`);
      assert.ok(types.indexOf("created") < types.indexOf("paused"));
      assert.deepEqual(seqs, [...seqs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      await assert.rejects(
        (async () => {
          for await (const _ of boxd.events({ filters: ["colour=blue"] })) void _;
        })(),
        boxd.InvalidArgument,
      );
    } finally {
      await sb.delete();
    }
    await assert.rejects(sb.stats(), boxd.NotFound);
    await assert.rejects(sb.pause(), boxd.NotFound);
  });
});
