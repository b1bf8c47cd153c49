// The conversation both node MCP clients hold with boxctl mcp, whatever
// the transport: list the tools (each input field described), then
// create, exec, write, read, a refused exec, and delete. Throws on the
// first failed check.
import assert from "node:assert/strict";

export const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");

// caller returns call(name, args, wantError) for client: a tool call whose
// isError must be wantError.
export function caller(client) {
  return async function call(name, args, wantError = false) {
    const r = await client.callTool({ name, arguments: args });
    assert.equal(Boolean(r.isError), wantError, `${name}: ${text(r)}`);
    return r;
  };
}

// converse holds the conversation and returns the tool names and the id of
// the sandbox it made (and deleted). marker tells its output apart.
export async function converse(client, marker) {
  const call = caller(client);
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
  const ran = await call("exec", { sandbox_id: id, command: `echo ${marker}; exit 7` });
  assert.equal(ran.structuredContent.exit_code, 7);
  assert.match(text(ran), new RegExp(`exit code: 7[\\s\\S]*${marker}`));
  await call("write_file", { sandbox_id: id, path: "notes/a.txt", content: "héllo\n" });
  const read = await call("read_file", { sandbox_id: id, path: "notes/a.txt" });
  assert.equal(read.structuredContent.content, "héllo\n");
  await call("exec", { sandbox_id: id }, true); // neither command nor args
  await call("sandbox_delete", { sandbox_id: id });
  return { names, id };
}
