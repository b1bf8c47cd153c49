// gRPC calls for file data, framed by hand on the client's HTTP/2 session.
//
// connect-node copies every message at least twice on the way in (the
// envelope decoder assembles each 1 MiB message into a fresh buffer, then
// the caller concatenates) and twice on the way out (protobuf-es encodes the
// data into a new message buffer, connect wraps it in a new envelope), and
// each fresh 1 MiB buffer costs page faults and garbage collection: 500-650
// ms of CPU per 100 MiB, against well under 100 ms for boxd's Go client.
// Here a data message goes out as its 5-byte envelope and protobuf field
// header followed by the caller's own buffer, and a received message's data
// field is handed on as views of the chunks the HTTP/2 stream delivered.
// Every other field still goes through the generated code, and errors,
// deadlines (grpc-timeout, so boxd cancels its work) and cancellation
// (RST_STREAM) behave as for the calls connect makes.

import * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { fromError } from "./errors.js";

/** Opens one HTTP/2 stream on the client's session (Client.h2stream). */
export type StreamOpener = (path: string, headers: http2.OutgoingHttpHeaders) => Promise<http2.ClientHttp2Stream>;

export interface RawOpts {
  timeoutMs?: number;
  signal?: AbortSignal;
}

const LEN = 2; // protobuf wire type: length-delimited

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/** The gRPC envelope header of a message of n bytes. */
function envelope(n: number): Uint8Array {
  const h = new Uint8Array(5);
  new DataView(h.buffer).setUint32(1, n);
  return h;
}

/**
 * The bytes before a data field's content: the envelope of a message made
 * of `prefix` plus bytes field `field` holding n bytes, then `prefix`, then
 * the field's tag and length.
 */
export function dataHeader(prefix: Uint8Array, field: number, n: number): Uint8Array {
  const tag = [...varint((field << 3) | LEN), ...varint(n)];
  const h = new Uint8Array(5 + prefix.length + tag.length);
  h.set(envelope(prefix.length + tag.length + n));
  h.set(prefix, 5);
  h.set(tag, 5 + prefix.length);
  return h;
}

/** One message enveloped (for requests encoded by the generated code). */
export function enveloped(msg: Uint8Array): Uint8Array {
  const h = new Uint8Array(5 + msg.length);
  h.set(envelope(msg.length));
  h.set(msg, 5);
  return h;
}

/**
 * One gRPC call on its own HTTP/2 stream: write() sends bytes (already
 * framed), responses() yields the received bytes as they come, and finish()
 * checks the status in the trailers. Errors come out as the SDK's typed
 * errors.
 */
export class RawCall {
  private stream!: http2.ClientHttp2Stream;
  private headers: http2.IncomingHttpHeaders | undefined;
  private trailers: http2.IncomingHttpHeaders | undefined;
  private failure: unknown;
  private timer: NodeJS.Timeout | undefined;
  private onAbort: (() => void) | undefined;
  private ended = false;

  private constructor(
    readonly socket: string,
    private readonly o: RawOpts,
  ) {}

  static async open(open: StreamOpener, socket: string, path: string, o: RawOpts): Promise<RawCall> {
    const c = new RawCall(socket, o);
    if (o.signal?.aborted) throw fromError(new ConnectError("the call was cancelled", Code.Canceled), socket);
    const headers: http2.OutgoingHttpHeaders = {
      "content-type": "application/grpc+proto",
      te: "trailers",
      "user-agent": "boxd-sdk-typescript",
    };
    if (o.timeoutMs !== undefined) headers["grpc-timeout"] = `${Math.max(1, Math.ceil(o.timeoutMs))}m`;
    try {
      c.stream = await open(path, headers);
    } catch (e) {
      throw fromError(e, socket);
    }
    const s = c.stream;
    s.on("response", (h) => (c.headers = h));
    s.on("trailers", (t) => (c.trailers = t));
    s.on("error", (e) => (c.failure ??= e));
    if (o.timeoutMs !== undefined) {
      c.timer = setTimeout(() => c.cancel(new ConnectError("the operation timed out", Code.DeadlineExceeded)), o.timeoutMs);
    }
    if (o.signal) {
      c.onAbort = () => c.cancel(new ConnectError("the call was cancelled", Code.Canceled));
      o.signal.addEventListener("abort", c.onAbort, { once: true });
    }
    return c;
  }

  /** Ends the call with err: resets the stream, so boxd stops the work. */
  cancel(err: unknown): void {
    this.failure ??= err;
    this.cleanup();
    if (!this.stream.closed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
  }

  private cleanup(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.onAbort) this.o.signal?.removeEventListener("abort", this.onAbort);
    this.onAbort = undefined;
  }

  private fail(): never {
    const e = this.failure;
    if (e instanceof ConnectError) throw fromError(e, this.socket);
    // A stream reset by boxd or a connection gone: the status, if any came.
    const se = this.statusError();
    if (se) throw fromError(se, this.socket);
    throw fromError(new ConnectError(String((e as Error)?.message ?? e), Code.Unavailable, undefined, undefined, e), this.socket);
  }

  /** Sends framed bytes, waiting while the stream's buffer is full. */
  async write(...parts: Uint8Array[]): Promise<void> {
    if (this.failure !== undefined || this.stream.destroyed) {
      // boxd answered early (an error, e.g. not_found): finish() reports it.
      return;
    }
    let ok = true;
    for (const p of parts) ok = this.stream.write(p);
    if (!ok) await this.drain();
  }

  private drain(): Promise<void> {
    return new Promise((resolve) => {
      const s = this.stream;
      // Already gone: no 'drain' or 'close' will come.
      if (s.destroyed || s.closed) return resolve();
      const done = () => {
        s.off("drain", done);
        s.off("close", done);
        resolve();
      };
      s.on("drain", done);
      s.on("close", done);
    });
  }

  /** Ends the request side. */
  endRequest(): void {
    if (!this.stream.destroyed && !this.stream.writableEnded) this.stream.end();
  }

  /**
   * Sends one whole request (already framed) and ends the request side:
   * one DATA frame carrying END_STREAM instead of a second, empty frame
   * (0.3 ms of CPU per exec less).
   */
  sendLast(msg: Uint8Array): void {
    if (this.failure !== undefined || this.stream.destroyed || this.stream.writableEnded) return;
    this.stream.end(msg);
  }

  /** The response body's bytes as they arrive (views of the stream's chunks). */
  async *chunks(): AsyncGenerator<Buffer> {
    try {
      for await (const c of this.stream as AsyncIterable<Buffer>) {
        if (this.failure !== undefined) break;
        yield c;
      }
    } catch (e) {
      this.failure ??= e;
    }
    if (this.failure !== undefined) this.fail();
    this.ended = true;
  }

  /**
   * The whole response body, collected by events (cheaper than the async
   * iterator for a small unary answer).
   */
  body(): Promise<Buffer[]> {
    return new Promise((resolve, reject) => {
      const parts: Buffer[] = [];
      const s = this.stream;
      const done = () => {
        s.off("data", onData);
        s.off("end", done);
        s.off("close", done);
        s.off("error", done);
        this.ended = true;
        try {
          if (this.failure !== undefined) this.fail();
          resolve(parts);
        } catch (e) {
          reject(e);
        }
      };
      const onData = (c: Buffer) => parts.push(c);
      s.on("data", onData);
      s.on("end", done);
      s.on("close", done);
      s.on("error", done);
      if (s.readableEnded || s.destroyed) done();
    });
  }

  private statusError(): ConnectError | undefined {
    const h = this.headers;
    const status = h?.[":status"] as unknown;
    if (h && status !== undefined && Number(status) !== 200) {
      return new ConnectError(`HTTP ${status}`, Code.Unavailable);
    }
    for (const src of [this.trailers, h]) {
      if (src && src["grpc-status"] !== undefined) return findTrailerError(toHeaders(src));
    }
    return undefined;
  }

  /** Checks the call's status once the body has been read. */
  finish(): void {
    this.cleanup();
    if (!this.ended) throw new Error("RawCall.finish before the body was read");
    const se = this.statusError();
    if (se) throw fromError(se, this.socket);
    const h = this.headers;
    if (!h || (this.trailers?.["grpc-status"] === undefined && h["grpc-status"] === undefined)) {
      throw fromError(new ConnectError("protocol error: missing status", Code.Internal), this.socket);
    }
  }

  /** Leaves the call (early exit from a read): resets it if still open. */
  close(): void {
    this.cleanup();
    if (!this.stream.closed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
  }
}

function toHeaders(h: http2.IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(":") || v === undefined) continue;
    for (const x of Array.isArray(v) ? v : [v]) out.append(k, String(x));
  }
  return out;
}

/**
 * Splits a gRPC response body into messages and, in each, hands the bytes
 * of field `field` on as views as they arrive; the message's other fields
 * are collected and passed to onRest once the message is complete.
 */
export class FieldSplitter {
  private hdr = new Uint8Array(16);
  private hdrLen = 0;
  // Envelope: bytes of the current message left; -1 before its header.
  private msgLeft = -1;
  // Inside a message: bytes of the current field's content left to pass on
  // (data) or to keep (rest); -1 between fields.
  private fieldLeft = -1;
  private inData = false;
  private rest: Uint8Array[] = [];

  constructor(
    private readonly field: number,
    private readonly onData: (b: Uint8Array) => void,
    private readonly onRest: (rest: Uint8Array) => void,
  ) {}

  /** Feeds one chunk of the response body. */
  push(c: Buffer): void {
    let i = 0;
    while (i < c.length) {
      if (this.msgLeft < 0) {
        // The 5-byte envelope header (compressed messages are never asked for).
        const n = Math.min(5 - this.hdrLen, c.length - i);
        this.hdr.set(c.subarray(i, i + n), this.hdrLen);
        this.hdrLen += n;
        i += n;
        if (this.hdrLen < 5) return;
        if (this.hdr[0] !== 0) throw new ConnectError("boxd sent a compressed message that was not asked for", Code.Internal);
        this.msgLeft = new DataView(this.hdr.buffer).getUint32(1);
        this.hdrLen = 0;
        this.fieldLeft = -1;
        this.rest = [];
        if (this.msgLeft === 0) this.endMessage();
        continue;
      }
      if (this.fieldLeft < 0) {
        // A field's key and, for length-delimited ones, its length: at most
        // 20 bytes, gathered across chunks if need be.
        this.hdr[this.hdrLen++] = c[i++];
        this.msgLeft--;
        const parsed = this.parseKey();
        if (parsed) this.hdrLen = 0;
        else if (this.hdrLen >= this.hdr.length || this.msgLeft === 0) throw new ConnectError("malformed message from boxd", Code.Internal);
        if (this.msgLeft === 0 && this.fieldLeft <= 0) this.endMessage();
        continue;
      }
      const n = Math.min(this.fieldLeft, c.length - i);
      const piece = c.subarray(i, i + n);
      // A plain Uint8Array view (not a Buffer), as connect's answers are.
      if (this.inData) this.onData(new Uint8Array(piece.buffer, piece.byteOffset, piece.length));
      else this.rest.push(new Uint8Array(piece));
      i += n;
      this.fieldLeft -= n;
      this.msgLeft -= n;
      if (this.fieldLeft === 0) this.fieldLeft = -1;
      if (this.msgLeft === 0) this.endMessage();
    }
  }

  /** True once hdr[0:hdrLen] holds a whole field key (and length). */
  private parseKey(): boolean {
    const h = this.hdr.subarray(0, this.hdrLen);
    const key = readVarint(h, 0);
    if (!key) return false;
    const [k, j] = key;
    const wt = k & 7;
    let len: number;
    let end: number;
    if (wt === LEN) {
      const l = readVarint(h, j);
      if (!l) return false;
      [len, end] = l;
    } else if (wt === 0) {
      const v = readVarint(h, j);
      if (!v) return false;
      len = 0;
      end = v[1];
    } else if (wt === 1 || wt === 5) {
      // Fixed-size values: keep them with the rest.
      len = wt === 1 ? 8 : 4;
      end = j;
    } else {
      throw new ConnectError(`unexpected wire type ${wt} from boxd`, Code.Internal);
    }
    this.inData = wt === LEN && k >>> 3 === this.field;
    if (!this.inData) this.rest.push(h.slice(0, end));
    this.fieldLeft = len > 0 ? len : -1;
    if (len > this.msgLeft) throw new ConnectError("malformed message from boxd", Code.Internal);
    return true;
  }

  private endMessage(): void {
    const rest = this.rest;
    this.rest = [];
    this.msgLeft = -1;
    this.fieldLeft = -1;
    if (rest.length) {
      const n = rest.reduce((a, p) => a + p.length, 0);
      const out = new Uint8Array(n);
      let o = 0;
      for (const p of rest) {
        out.set(p, o);
        o += p.length;
      }
      this.onRest(out);
    }
  }

  /** True between messages (the body may end here). */
  get atBoundary(): boolean {
    return this.msgLeft < 0 && this.hdrLen === 0;
  }
}

function readVarint(b: Uint8Array, i: number): [number, number] | undefined {
  let v = 0;
  let mul = 1;
  for (; i < b.length; i++) {
    v += (b[i] & 0x7f) * mul;
    if (!(b[i] & 0x80)) return [v, i + 1];
    mul *= 128;
    if (mul > 2 ** 63) throw new ConnectError("malformed varint from boxd", Code.Internal);
  }
  return undefined;
}

/**
 * A unary call, hand-framed on the client's session: the request is
 * already encoded; the answer's bytes come back. Used for exec, where
 * connect's per-call layers (async iterables, abort signals, header
 * objects) cost 3-5 ms of CPU per call against under 1 ms for this.
 */
export async function rawUnary(open: StreamOpener, socket: string, path: string, req: Uint8Array, o: RawOpts): Promise<Uint8Array> {
  const call = await RawCall.open(open, socket, path, o);
  call.sendLast(enveloped(req));
  return readOne(call);
}

/** The one response message of a unary or client-streaming call. */
export async function readOne(call: RawCall): Promise<Uint8Array> {
  const socket = call.socket;
  const parts = await call.body();
  call.finish();
  const b = parts.length === 1 ? parts[0] : Buffer.concat(parts);
  if (b.length < 5 || b[0] !== 0 || b.readUInt32BE(1) !== b.length - 5) {
    throw fromError(new ConnectError("boxd's answer is not one gRPC message", Code.Internal), socket);
  }
  // A plain Uint8Array view (not a Buffer), as connect's answers are.
  return new Uint8Array(b.buffer, b.byteOffset + 5, b.length - 5);
}
