// Unary calls in the Connect protocol over HTTP/1.1 keep-alive connections
// on boxd's Unix socket, with the request written and the response parsed
// here, on plain net.Sockets.
//
// Why: Node's http2 module (and its http module no less) costs about 1 ms
// of CPU per request on the 2-core VM this was measured on, against about
// 0.45 ms for this; in `BENCH_ONLY=sdk make bench` a bare http2 request
// for Exec, with no SDK around it, was already 1.2-1.7 ms slower than
// boxd's Go client, the whole budget of the SDK target (see
// docs/performance.md). boxd serves the Connect protocol over HTTP/1.1 on the same
// socket (Go's net/http): the message is the bare binary protobuf
// (application/proto), an error a JSON body with its code and message.
//
// A call takes an idle connection or opens one, up to MAX_CONNS per Client;
// when all are busy, call() returns undefined and the caller uses the
// HTTP/2 session instead, so concurrency never waits here and boxd's
// connection limit is not eaten up. The deadline goes to boxd as
// Connect-Timeout-Ms (boxd cancels the work) and is also enforced here; an
// aborted or timed-out call destroys its connection, which cancels the
// call's context in boxd (the command is killed) like an HTTP/2 reset.

import * as net from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { codeFromHttpStatus, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { fromError } from "./errors.js";
import type { RawOpts } from "./rawgrpc.js";

/** Connections per Client for unary calls (the rest go over HTTP/2). */
export const MAX_CONNS = 4;
/**
 * An idle connection is closed after this long, well before boxd's own
 * --conn-idle-timeout (5 minutes by default) would close it under a
 * request being written.
 */
const IDLE_MS = 20_000;
/** Longest status line plus headers accepted from boxd. */
const MAX_HEAD = 64 << 10;
/** Largest body accepted (an ExecResponse with 16 MiB of output fits). */
const MAX_BODY = 64 << 20;

const CRLF2 = Buffer.from("\r\n\r\n");

/** A parse failure of boxd's answer. */
function malformed(what: string): ConnectError {
  return new ConnectError(what, Code.Internal);
}

/**
 * One HTTP/1.1 response being read: feed() gets the socket's chunks and
 * returns true once the response is complete.
 */
class Response {
  status = 0;
  headers = new Map<string, string>();
  body: Buffer[] = [];
  bodyLen = 0;
  keepAlive = true;
  private head: Buffer | undefined;
  private phase: "head" | "length" | "chunkSize" | "chunk" | "chunkEnd" | "trailers" | "close" | "done" = "head";
  private left = 0;
  private line: Buffer | undefined;

  /** Gathers bytes up to and including the next CRLF; undefined until then. */
  private takeLine(c: Buffer, i: number): [Buffer, number] | undefined {
    const nl = c.indexOf(10, i);
    const upto = nl < 0 ? c.length : nl + 1;
    this.line = this.line ? Buffer.concat([this.line, c.subarray(i, upto)]) : c.subarray(i, upto);
    if (this.line.length > MAX_HEAD) throw malformed("a line of boxd's answer is too long");
    if (nl < 0) return undefined;
    const l = this.line;
    this.line = undefined;
    return [l.subarray(0, l.length - (l.length > 1 && l[l.length - 2] === 13 ? 2 : 1)), upto];
  }

  private addBody(b: Buffer): void {
    this.bodyLen += b.length;
    if (this.bodyLen > MAX_BODY) throw malformed(`boxd's answer is over ${MAX_BODY} bytes`);
    this.body.push(b);
  }

  feed(c: Buffer): boolean {
    let i = 0;
    while (i < c.length || this.phase === "done") {
      switch (this.phase) {
        case "head": {
          const h = this.head ? Buffer.concat([this.head, c.subarray(i)]) : c.subarray(i);
          const end = h.indexOf(CRLF2);
          if (end < 0) {
            if (h.length > MAX_HEAD) throw malformed("boxd's answer has too long a header");
            this.head = Buffer.from(h); // the chunk's buffer may be reused
            return false;
          }
          const consumed = end + 4 - (this.head?.length ?? 0);
          this.head = undefined;
          i += consumed;
          if (this.parseHead(h.toString("latin1", 0, end))) continue; // 1xx: the real answer follows
          break;
        }
        case "length": {
          const n = Math.min(this.left, c.length - i);
          this.addBody(c.subarray(i, i + n));
          i += n;
          this.left -= n;
          if (this.left === 0) this.phase = "done";
          break;
        }
        case "chunkSize": {
          const got = this.takeLine(c, i);
          if (!got) return false;
          i = got[1];
          const size = got[0].toString("latin1").split(";")[0].trim();
          if (!/^[0-9a-fA-F]{1,8}$/.test(size)) throw malformed("bad chunk size in boxd's answer");
          this.left = parseInt(size, 16);
          this.phase = this.left === 0 ? "trailers" : "chunk";
          break;
        }
        case "chunk": {
          const n = Math.min(this.left, c.length - i);
          this.addBody(c.subarray(i, i + n));
          i += n;
          this.left -= n;
          if (this.left === 0) this.phase = "chunkEnd";
          break;
        }
        case "chunkEnd": {
          const got = this.takeLine(c, i);
          if (!got) return false;
          if (got[0].length !== 0) throw malformed("bad chunk end in boxd's answer");
          i = got[1];
          this.phase = "chunkSize";
          break;
        }
        case "trailers": {
          const got = this.takeLine(c, i);
          if (!got) return false;
          i = got[1];
          if (got[0].length === 0) this.phase = "done";
          break;
        }
        case "close":
          this.addBody(c.subarray(i));
          return false;
        case "done":
          // Bytes after the answer: nothing was asked for them.
          if (i < c.length) throw malformed("boxd sent more than one answer");
          return true;
      }
    }
    return (this.phase as string) === "done";
  }

  /** At the connection's end: true if that completes the answer. */
  endOfStream(): boolean {
    if (this.phase === "close") {
      this.phase = "done";
      return true;
    }
    return this.phase === "done";
  }

  /** Parses the status line and headers; true for an interim (1xx) answer. */
  private parseHead(head: string): boolean {
    const lines = head.split("\r\n");
    const m = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0]);
    if (!m) throw malformed(`not an HTTP/1.1 answer: ${JSON.stringify(lines[0].slice(0, 40))}`);
    this.status = Number(m[2]);
    if (this.status >= 100 && this.status < 200) return true;
    this.headers.clear();
    for (let k = 1; k < lines.length; k++) {
      const colon = lines[k].indexOf(":");
      if (colon <= 0) throw malformed("a malformed header in boxd's answer");
      const name = lines[k].slice(0, colon).trim().toLowerCase();
      const value = lines[k].slice(colon + 1).trim();
      const prev = this.headers.get(name);
      this.headers.set(name, prev === undefined ? value : `${prev}, ${value}`);
    }
    const conn = (this.headers.get("connection") ?? "").toLowerCase();
    this.keepAlive = m[1] === "1" ? !conn.includes("close") : conn.includes("keep-alive");
    const te = this.headers.get("transfer-encoding");
    const cl = this.headers.get("content-length");
    if (te !== undefined) {
      if (te.toLowerCase() !== "chunked") throw malformed(`transfer-encoding ${te} from boxd`);
      this.phase = "chunkSize";
    } else if (cl !== undefined) {
      if (!/^\d{1,12}$/.test(cl)) throw malformed("a bad content-length from boxd");
      this.left = Number(cl);
      if (this.left > MAX_BODY) throw malformed(`boxd's answer is over ${MAX_BODY} bytes`);
      this.phase = this.left === 0 ? "done" : "length";
    } else if (this.status === 204 || this.status === 304) {
      this.phase = "done";
    } else {
      this.phase = "close";
      this.keepAlive = false;
    }
    return false;
  }

  bytes(): Buffer {
    return this.body.length === 1 ? this.body[0] : Buffer.concat(this.body, this.bodyLen);
  }
}

/** One keep-alive connection; at most one call on it at a time. */
class Conn {
  private res: Response | undefined;
  private done: ((err: unknown, res?: Response) => void) | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** The method of the call in progress, for Client.openStreams(). */
  path: string | undefined;
  dead = false;

  constructor(
    readonly sock: net.Socket,
    private readonly onGone: (c: Conn) => void,
  ) {
    sock.on("data", (c: Buffer) => {
      const res = this.res;
      if (!res) {
        // Nothing asked: boxd does not send unprompted, so the connection
        // is no longer in step.
        this.destroy();
        return;
      }
      let complete: boolean;
      try {
        complete = res.feed(c);
      } catch (e) {
        this.fail(e);
        return;
      }
      if (complete) this.finish(res);
    });
    sock.on("end", () => {
      const res = this.res;
      if (res && res.endOfStream()) this.finish(res);
      else this.fail(new ConnectError("boxd closed the connection before it answered", Code.Unavailable));
    });
    sock.on("error", (e) => this.fail(e));
    sock.on("close", () => this.fail(new ConnectError("the connection to boxd closed", Code.Unavailable)));
  }

  /** Sends one request; cb gets the answer or the error. */
  send(path: string, head: Buffer, body: Uint8Array, cb: (err: unknown, res?: Response) => void): void {
    this.stopIdle();
    this.path = path;
    this.res = new Response();
    this.done = cb;
    this.sock.ref();
    if (body.length > 16 << 10) {
      this.sock.cork();
      this.sock.write(head);
      this.sock.write(body);
      this.sock.uncork();
    } else {
      this.sock.write(Buffer.concat([head, body]));
    }
  }

  private finish(res: Response): void {
    const cb = this.done;
    this.res = undefined;
    this.done = undefined;
    this.path = undefined;
    if (!res.keepAlive) this.destroy();
    cb?.(null, res);
  }

  private fail(err: unknown): void {
    const cb = this.done;
    this.res = undefined;
    this.done = undefined;
    this.path = undefined;
    this.destroy();
    cb?.(err);
  }

  /** Idle from now on: not keeping Node alive, closed after IDLE_MS. */
  idle(): void {
    this.sock.unref();
    this.idleTimer = setTimeout(() => this.destroy(), IDLE_MS);
    this.idleTimer.unref();
  }

  private stopIdle(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  destroy(): void {
    this.stopIdle();
    if (!this.dead) {
      this.dead = true;
      this.sock.destroy();
      this.onGone(this);
    }
  }
}

/** The HTTP/1.1 connections of one Client. */
export class UnaryPool {
  private readonly idle: Conn[] = [];
  private readonly busy = new Set<Conn>();

  constructor(
    private readonly socket: string,
    private readonly disabled = false,
  ) {}

  /**
   * Runs a unary call: req is the request message's bytes, the answer the
   * response message's. undefined when MAX_CONNS calls are in progress
   * already (the caller goes over HTTP/2 then).
   */
  call(path: string, req: Uint8Array, o: RawOpts): Promise<Uint8Array> | undefined {
    if (this.disabled) return undefined; // a client with a host: HTTP/2 over TLS only
    if (o.signal?.aborted) return Promise.reject(fromError(new ConnectError("the call was cancelled", Code.Canceled), this.socket));
    let conn = this.idle.pop();
    if (!conn) {
      if (this.busy.size >= MAX_CONNS) return undefined;
      conn = this.dial();
    }
    this.busy.add(conn);
    return this.run(conn, path, req, o);
  }

  private dial(): Conn {
    const sock = net.connect(this.socket);
    const conn: Conn = new Conn(sock, (c) => {
      this.busy.delete(c);
      const i = this.idle.indexOf(c);
      if (i >= 0) this.idle.splice(i, 1);
    });
    return conn;
  }

  private run(conn: Conn, path: string, req: Uint8Array, o: RawOpts): Promise<Uint8Array> {
    const socket = this.socket;
    return new Promise<Uint8Array>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      let settled = false;
      const settle = (err: unknown, msg?: Uint8Array) => {
        if (settled) return;
        settled = true;
        if (timer) clearTimeout(timer);
        if (onAbort) o.signal?.removeEventListener("abort", onAbort);
        if (err === undefined) resolve(msg!);
        else reject(fromError(err, socket));
      };
      // Leaving a call early: the connection goes (boxd sees it closed and
      // cancels the call's work).
      const leave = (err: ConnectError) => {
        settle(err);
        conn.destroy();
      };
      let head = `POST ${path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: boxd-sdk-typescript\r\nContent-Type: application/proto\r\nConnect-Protocol-Version: 1\r\nContent-Length: ${req.length}\r\n`;
      if (o.timeoutMs !== undefined) {
        const ms = Math.max(1, Math.ceil(o.timeoutMs));
        head += `Connect-Timeout-Ms: ${ms}\r\n`;
        timer = setTimeout(() => leave(new ConnectError("the operation timed out", Code.DeadlineExceeded)), ms);
      }
      if (o.signal) {
        onAbort = () => leave(new ConnectError("the call was cancelled", Code.Canceled));
        o.signal.addEventListener("abort", onAbort, { once: true });
      }
      conn.send(path, Buffer.from(head + "\r\n", "latin1"), req, (err, res) => {
        if (!conn.dead) {
          this.busy.delete(conn);
          this.idle.push(conn);
          conn.idle();
        }
        if (err !== null && err !== undefined) return settle(err);
        try {
          settle(undefined, answer(res!));
        } catch (e) {
          settle(e);
        }
      });
    });
  }

  /** The connections open, idle or busy. */
  connections(): number {
    return this.idle.length + this.busy.size;
  }

  /** The methods of the calls in progress. */
  openCalls(): string[] {
    return [...this.busy].flatMap((c) => (c.path ? [c.path] : []));
  }

  /** Closes every connection (calls in progress fail as Unavailable). */
  close(): void {
    for (const c of [...this.idle, ...this.busy]) c.destroy();
  }
}

/** The response message of a Connect unary answer, or its error. */
function answer(res: Response): Uint8Array {
  const b = res.bytes();
  const ct = (res.headers.get("content-type") ?? "").toLowerCase();
  if (res.status === 200) {
    if (!ct.startsWith("application/proto")) {
      throw new ConnectError(`boxd answered with content-type ${JSON.stringify(ct)}`, Code.Internal);
    }
    if (res.headers.has("content-encoding") && res.headers.get("content-encoding") !== "identity") {
      throw new ConnectError("boxd compressed an answer that was not asked to be", Code.Internal);
    }
    // A plain Uint8Array view (not a Buffer), as connect's answers are.
    return new Uint8Array(b.buffer, b.byteOffset, b.length);
  }
  const fallback = new ConnectError(`HTTP ${res.status}`, codeFromHttpStatus(res.status));
  if (ct.startsWith("application/json")) throw errorFromJsonBytes(b, undefined, fallback);
  throw fallback;
}
