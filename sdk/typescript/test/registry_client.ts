// Pull and push through the TypeScript SDK against a real registry: e2e
// TestSDKRegistry starts Debian's docker-registry on loopback with TLS and
// basic auth, and a boxd that trusts its CA, then runs this with
// REGISTRY_HOST, REGISTRY_USER and REGISTRY_PASSWORD set. Prints OK at the
// end; any failure throws.

import assert from "node:assert/strict";
import * as boxd from "../src/index.js";

const HOST = process.env.REGISTRY_HOST!;
const AUTH = { username: process.env.REGISTRY_USER!, password: process.env.REGISTRY_PASSWORD! };
const IMAGE = process.env.BOXD_TEST_IMAGE!;

async function main(): Promise<void> {
  const ref = `${HOST}/sdk/typescript:v1`;
  await assert.rejects(boxd.images.push(ref, { source: IMAGE }), (e: unknown) => e instanceof boxd.PermissionDenied && e.message.includes(HOST));
  await assert.rejects(boxd.images.push(ref, { source: IMAGE, auth: { username: AUTH.username, password: "wrong" } }), boxd.PermissionDenied);

  const phases = new Set<string>();
  const digest = await boxd.images.push(ref, { source: IMAGE, auth: AUTH, onProgress: (p) => phases.add(p.phase) });
  assert.match(digest, /^sha256:/);
  console.log("pushed", ref, digest, "phases", [...phases].sort());

  const kinds = new Set<string>();
  const img = await boxd.images.pull(ref, { auth: AUTH, onProgress: (p) => p.blobs.forEach((b) => kinds.add(b.kind)) });
  assert.deepEqual([img.name, img.digest], [ref, digest]);
  assert.ok(kinds.has("layer"), [...kinds].join(","));
  assert.equal(img.labels["boxd.io/pulled-from"], `${ref}@${digest}`);
  {
    await using sb = await boxd.Sandbox.create({ image: ref, memory: "128m", ttl: "5m" });
    assert.equal((await sb.exec(["echo", "pulled"])).stdoutText, "pulled\n");
  }
  assert.equal((await boxd.images.pull(ref, { auth: AUTH })).digest, digest);
  await assert.rejects(boxd.images.pull(`${HOST}/sdk/typescript:no-such-tag`, { auth: AUTH }), boxd.NotFound);
  await assert.rejects(boxd.images.pull("no-registry-named"), boxd.InvalidArgument);
  await boxd.images.remove(ref);

  {
    await using sb = await boxd.Sandbox.create({ image: ref, pull: "missing", auth: AUTH, memory: "128m", ttl: "5m" });
    assert.equal((await sb.exec(["true"])).exitCode, 0);
  }
  await boxd.images.remove(ref, { force: true });
  boxd.defaultClient().close();
  console.log("OK");
}

await main();
