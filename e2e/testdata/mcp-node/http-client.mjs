// Drives `boxctl mcp --http-socket` with the official TypeScript MCP SDK's
// streamable HTTP client, over the Unix socket (its fetch goes through
// node:http with socketPath): list the tools, then create, exec, write,
// read and delete, and create one more sandbox that the end of the session
// (the client's DELETE) must remove. Usage: node http-client.mjs SOCKET.
// Exits non-zero on the first failed check; prints a JSON summary.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { caller, converse } from "./conversation.mjs";
import { unixFetcher } from "./unix-fetch.mjs";

const [socketPath] = process.argv.slice(2);

const transport = new StreamableHTTPClientTransport(new URL("http://localhost/mcp"), { fetch: unixFetcher(socketPath) });
const client = new Client({ name: "boxd-e2e-node-http", version: "1.0.0" });
await client.connect(transport);

const call = caller(client);
const { names, id } = await converse(client, "from-node-http");
const left = (await call("sandbox_create", {})).structuredContent.id;
const listed = await call("sandbox_list", {});
assert.deepEqual(listed.structuredContent.sandboxes.map((s) => s.id), [left]);
const session = transport.sessionId;
assert.ok(session, "no Mcp-Session-Id");
await transport.terminateSession(); // DELETE: the session ends
await client.close();
console.log(JSON.stringify({ ok: true, tools: names.length, deleted: id, left, session }));
