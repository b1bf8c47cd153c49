// Drives `boxctl mcp` with the official TypeScript MCP SDK's client, as an
// agent host (Claude Desktop, an IDE) would: list the tools, then create,
// exec, write, read and delete. Usage: node client.mjs BOXCTL SOCKET.
// Exits non-zero on the first failed check; prints a JSON summary.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [boxctl, socket] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: boxctl, args: ["--socket", socket, "mcp"], stderr: "inherit" });
const client = new Client({ name: "boxd-e2e-node", version: "1.0.0" });
await client.connect(transport);

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
async function call(name, args, wantError = false) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(Boolean(r.isError), wantError, `${name}: ${text(r)}`);
  return r;
}

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort();
for (const want of ["sandbox_create", "sandbox_list", "sandbox_delete", "exec", "read_file", "write_file", "list_files", "edit_file"]) {
  assert.ok(names.includes(want), `tools ${names} lack ${want}`);
}
for (const t of tools) {
  for (const [p, s] of Object.entries(t.inputSchema.properties ?? {})) {
    assert.ok(s.description, `${t.name}.${p} has no description`);
  }
}

const created = await call("sandbox_create", {});
const id = created.structuredContent.id;
assert.ok(id && text(created).includes(id));
const ran = await call("exec", { sandbox_id: id, command: "echo from-node; exit 7" });
assert.equal(ran.structuredContent.exit_code, 7);
assert.match(text(ran), /exit code: 7[\s\S]*from-node/);
await call("write_file", { sandbox_id: id, path: "notes/a.txt", content: "héllo\n" });
const read = await call("read_file", { sandbox_id: id, path: "notes/a.txt" });
assert.equal(read.structuredContent.content, "héllo\n");
await call("exec", { sandbox_id: id }, true); // neither command nor args
await call("sandbox_delete", { sandbox_id: id });
const listed = await call("sandbox_list", {});
assert.equal(listed.structuredContent.sandboxes.length, 0);
await client.close();
console.log(JSON.stringify({ ok: true, tools: names.length, sandbox: id }));
