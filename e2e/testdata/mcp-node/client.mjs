// Drives `boxctl mcp` with the official TypeScript MCP SDK's client, as an
// agent host (Claude Desktop, an IDE) would: list the tools, then create,
// exec, write, read and delete. Usage: node client.mjs BOXCTL SOCKET.
// Exits non-zero on the first failed check; prints a JSON summary.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { caller, converse } from "./conversation.mjs";

const [boxctl, socket] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: boxctl, args: ["--socket", socket, "mcp"], stderr: "inherit" });
const client = new Client({ name: "boxd-e2e-node", version: "1.0.0" });
await client.connect(transport);

const { names, id } = await converse(client, "from-node");
const listed = await caller(client)("sandbox_list", {});
assert.equal(listed.structuredContent.sandboxes.length, 0);
await client.close();
console.log(JSON.stringify({ ok: true, tools: names.length, sandbox: id }));
