// Sandbox.diff against a real boxd.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as boxd from "../src/index.js";
import { Sandbox } from "../src/index.js";
import { IMAGE, LABELS } from "./support.js";

describe("diff", () => {
  test("the files a command added, changed and deleted, with a patch", async () => {
    await using sb = await Sandbox.create({ image: IMAGE, ttl: "10m", labels: LABELS });
    await sb.exec(["sh", "-c", "echo hi > /workspace/new; rm /etc/shadow; chmod 600 /etc/hostname; touch \"$(printf '/workspace/b\\377d')\""]);
    const ch = await sb.diff({ patch: true });
    assert.equal(ch.truncated, false);
    assert.deepEqual(ch.entries.map((e) => `${e.change} ${e.path} ${e.type}`), [
      "modified /etc/hostname file", "deleted /etc/shadow file", "added /workspace/b\ufffdd file", "added /workspace/new file",
    ]);
    assert.equal(ch.entries[0].mode, 0o600);
    assert.deepEqual([...ch.entries[2].rawPath], [...Buffer.from("/workspace/b\xffd", "latin1")]);
    assert.equal(ch.entries[3].patch, "--- /dev/null\n+++ b/workspace/new\n@@ -0,0 +1,1 @@\n+hi\n");
    await assert.rejects(sb.diff({ since: "fork" }), boxd.FailedPrecondition);
  });
});
