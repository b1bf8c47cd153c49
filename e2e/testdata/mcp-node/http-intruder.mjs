// Another session's attack with the official TypeScript MCP SDK's
// streamable HTTP client: on `boxctl mcp --http-socket SOCKET`, call every
// tool that takes a sandbox_id (from the server's tool list) on each REF
// (another session's sandbox id or name), with arguments that would work
// for its owner (a file secret.txt, a process p1), and on a made-up ref of
// the same length; each answer must be the same not_found, the ref aside.
// Usage: node http-intruder.mjs SOCKET REF... Exits non-zero on the first
// failed check; prints a JSON summary.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { text } from "./conversation.mjs";
import { unixFetcher } from "./unix-fetch.mjs";

const [socketPath, ...refs] = process.argv.slice(2);

const args = {
  exec: { command: "touch /tmp/pwned" },
  process_start: { command: "touch /tmp/pwned" },
  read_file: { path: "secret.txt" },
  write_file: { path: "secret.txt", content: "node was here\n" },
  edit_file: { path: "secret.txt", old_text: "secret", new_text: "node" },
  list_files: { path: "." },
  process_read: { process_id: "p1" },
  process_kill: { process_id: "p1" },
  run_code: { code: "open('/tmp/pwned', 'w')" },
};

const transport = new StreamableHTTPClientTransport(new URL("http://localhost/mcp"), { fetch: unixFetcher(socketPath) });
const client = new Client({ name: "boxd-e2e-node-intruder", version: "1.0.0" });
await client.connect(transport);

async function answer(tool, ref) {
  const r = await client.callTool({ name: tool, arguments: { ...(args[tool] ?? {}), sandbox_id: ref } });
  return { isError: Boolean(r.isError), text: text(r).replaceAll(ref, "REF") };
}

const { tools } = await client.listTools();
// sandbox_delete last: should it get through, the rest still show what
// they would reach.
const attacked = tools
  .filter((t) => "sandbox_id" in (t.inputSchema.properties ?? {}))
  .map((t) => t.name)
  .sort((a, b) => (a === "sandbox_delete") - (b === "sandbox_delete"));
for (const tool of attacked) {
  for (const ref of refs) {
    const fake = "x" + randomBytes(ref.length).toString("hex").slice(0, ref.length - 1);
    const got = await answer(tool, ref);
    const want = await answer(tool, fake);
    assert.ok(want.isError && want.text.includes("not_found"), `${tool} on a made-up ref: ${JSON.stringify(want)}`);
    assert.deepEqual(got, want, `${tool} on another session's sandbox ${ref}`);
  }
}
const listed = await client.callTool({ name: "sandbox_list", arguments: {} });
assert.deepEqual(listed.structuredContent.sandboxes, [], `sandbox_list: ${text(listed)}`);
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ ok: true, attacked }));
