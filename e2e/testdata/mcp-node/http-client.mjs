// Drives `boxctl mcp --http-socket` with the official TypeScript MCP SDK's
// streamable HTTP client, over the Unix socket (its fetch goes through
// node:http with socketPath): list the tools, then create, exec, write,
// read and delete, and create one more sandbox that the end of the session
// (the client's DELETE) must remove. Usage: node http-client.mjs SOCKET.
// Exits non-zero on the first failed check; prints a JSON summary.
import assert from "node:assert/strict";
import * as http from "node:http";
import { Readable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { caller, converse } from "./conversation.mjs";

const [socketPath] = process.argv.slice(2);

// fetch over a Unix socket: Node's own fetch has no socket option.
function unixFetch(url, init = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers = {};
    new Headers(init.headers).forEach((v, k) => (headers[k] = v));
    const req = http.request({ socketPath, path: u.pathname + u.search, method: init.method ?? "GET", headers }, (res) => {
      const h = new Headers();
      for (const [k, v] of Object.entries(res.headers)) for (const x of [v].flat()) h.append(k, String(x));
      const empty = res.statusCode === 204 || res.statusCode === 304 || init.method === "HEAD";
      if (empty) res.resume();
      resolve(new Response(empty ? null : Readable.toWeb(res), { status: res.statusCode, statusText: res.statusMessage, headers: h }));
    });
    req.on("error", reject);
    // The SDK gives every request the same signal: drop the listener once
    // the exchange is over.
    const onAbort = () => req.destroy(Object.assign(new Error("aborted"), { name: "AbortError" }));
    init.signal?.addEventListener("abort", onAbort, { once: true });
    req.on("close", () => init.signal?.removeEventListener("abort", onAbort));
    req.end(init.body === undefined || init.body === null ? undefined : typeof init.body === "string" ? init.body : Buffer.from(init.body));
  });
}

const transport = new StreamableHTTPClientTransport(new URL("http://localhost/mcp"), { fetch: unixFetch });
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
