// Driven by e2e TestSDKTypeScriptRemote (not a node:test file): calls a TCP
// listener of boxd's over TLS with a token, every setting from BOXD_HOST,
// BOXD_TOKEN and BOXD_TLS_CA, BOXD_SOCKET naming no socket (a call that
// went to a socket would fail). Creates a sandbox (prints "sandbox ID"),
// runs commands (unary, the bidi Exec, a server stream), writes and reads
// a file, then checks a wrong token gets boxd.Unauthenticated and a host
// without a token is InvalidArgument before any call. Prints OK at the end.

import assert from "node:assert/strict";
import * as boxd from "../src/index.js";

const TOKEN = process.env.BOXD_TOKEN!;

async function main(): Promise<void> {
  const c = new boxd.Client();
  assert.ok(c.host?.startsWith("https://"), String(c.host));
  const sb = await boxd.Sandbox.create({ client: c });
  console.log("sandbox", sb.id);
  let r = await sb.exec(["sh", "-c", "echo over tls; exit 3"]);
  assert.deepEqual([r.exitCode, Buffer.from(r.stdout).toString()], [3, "over tls\n"]);
  r = await sb.exec(["cat"], { stdin: "piped in" });
  assert.deepEqual([r.exitCode, Buffer.from(r.stdout).toString()], [0, "piped in"]);
  let out = "";
  for await (const o of sb.execStream(["sh", "-c", "echo a; echo b"])) out += Buffer.from(o.data).toString();
  assert.equal(out, "a\nb\n");
  const data = new Uint8Array(3 << 20).map((_, i) => (i * 7) & 0xff);
  await sb.files.write("/tmp/f.bin", data);
  assert.ok(Buffer.from(await sb.files.read("/tmp/f.bin")).equals(Buffer.from(data)));
  c.close();

  const bad = new boxd.Client({ token: TOKEN.slice(0, -4) + (TOKEN.endsWith("AAAA") ? "BBBB" : "AAAA") });
  await assert.rejects(boxd.Sandbox.create({ client: bad }), (e: unknown) => {
    assert.ok(e instanceof boxd.Unauthenticated, String(e));
    assert.ok(!String(e).includes(TOKEN.slice(0, -4)), String(e));
    console.log("wrong token:", String(e));
    return true;
  });
  bad.close();
  delete process.env.BOXD_TOKEN;
  assert.throws(() => new boxd.Client(), (e: unknown) => e instanceof boxd.InvalidArgument && String(e).includes("token"));
  console.log("OK");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
