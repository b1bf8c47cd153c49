import * as http from "node:http";
import { Readable } from "node:stream";

// unixFetcher is fetch over the Unix socket at socketPath, for the MCP
// SDK's streamable HTTP client: Node's own fetch has no socket option.
export const unixFetcher = (socketPath) => function unixFetch(url, init = {}) {
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
};
