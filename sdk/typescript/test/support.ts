// Shared set-up: the tests run against the boxd at $BOXD_SOCKET (the e2e
// harness, e2e/sdk_typescript_test.go, starts one on a private containerd)
// and use the image $BOXD_TEST_IMAGE (default: the daemon's default image).

import assert from "node:assert/strict";
import { after, afterEach } from "node:test";
import { Sandbox, defaultClient } from "../src/index.js";

export const IMAGE = process.env.BOXD_TEST_IMAGE || undefined;
export const LABELS = { "sdk-test": "typescript" };

if (!process.env.BOXD_SOCKET) {
  throw new Error("BOXD_SOCKET must name the test daemon's socket");
}

export const enc = new TextEncoder();
export const bytes = (s: string): Uint8Array => enc.encode(s);

/** A sandbox for one test file, deleted by the returned cleanup. */
export async function sandbox(): Promise<Sandbox> {
  return Sandbox.create({ image: IMAGE, memory: "256m", ttl: "10m", labels: LABELS });
}

/** The command lines running in the sandbox. */
export async function ps(sb: Sandbox): Promise<string> {
  return (await sb.exec(["ps", "-o", "args"])).stdoutText;
}

/** Waits until cond() holds, polling, at most ms; returns whether it did. */
export async function until(cond: () => Promise<boolean>, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// After each test file: every call has closed its HTTP/2 stream (a stream
// left open would keep a user's program from exiting), then the
// connection is closed. A stream a test abandoned ends once boxd has
// killed its command and the init has said so, which on a loaded CI
// machine took more than 3 s once; a stream that leaks never ends.
//
// Each stream still open when a test ends is put down to that test, so
// that a stream left open for good names the test that opened it.
const openedIn = new Map<string, string>();
afterEach((t) => {
  for (const id of defaultClient().openStreamIds()) {
    if (!openedIn.has(id)) openedIn.set(id, t.name);
  }
});
after(async () => {
  const c = defaultClient();
  const closed = await until(async () => c.openStreams().length === 0, 15000);
  const left = [
    ...c.openStreamIds().map((id) => `${id} (open since the test "${openedIn.get(id) ?? "?"}")`),
    ...c.http1.openCalls().map((p) => `${p} (HTTP/1.1)`),
  ];
  c.close();
  assert.ok(closed, `streams left open after the tests: ${left.join(", ")}`);
});
