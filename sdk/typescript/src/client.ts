// The connection to boxd: one HTTP/2 connection on the Unix socket, shared
// by every call of a Client, plus up to four kept HTTP/1.1 connections for
// the unary exec (http1.ts: Node's http2 costs about 1 ms of CPU per call).
//
// boxd serves gRPC (besides Connect and gRPC-Web) from one handler, over
// HTTP/2 without TLS on its socket. connect-node's gRPC transport does the
// protocol over Node's http2 module; the socket is given to http2.connect
// as createConnection, since Node's http2 has no Unix-socket URLs. Messages
// are binary protobuf (no JSON, no base64), deadlines go to boxd as
// grpc-timeout (so boxd cancels the work when a call's time is up), and an
// aborted call resets its stream (so leaving a streaming exec kills the
// command).

import * as http2 from "node:http2";
import * as net from "node:net";
import * as fs from "node:fs";
import * as path from "node:path";
import { createClient, type CallOptions, type Client as RpcClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { SandboxService } from "./gen/boxd/v1/boxd_pb.js";
import { EventService } from "./gen/boxd/v1/events_pb.js";
import { FileService } from "./gen/boxd/v1/files_pb.js";
import { ProcessService } from "./gen/boxd/v1/process_pb.js";
import { PoolService } from "./gen/boxd/v1/pool_pb.js";
import { RegistryService } from "./gen/boxd/v1/registry_pb.js";
import { CodeService } from "./gen/boxd/v1/interp_pb.js";
import { InvalidArgument, fromError } from "./errors.js";
import { UnaryPool } from "./http1.js";
import type { StreamOpener } from "./rawgrpc.js";

export const DEFAULT_SOCKET = "/run/boxd/boxd.sock";

/** File data goes in pieces of 1 MiB, the size boxd itself sends. */
export const CHUNK = 1 << 20;
// boxd refuses messages above 8 MiB; a reply (ExecResponse with 16 MiB of
// output at most) stays under this.
const MAX_MESSAGE = 64 << 20;
// HTTP/2 receive windows as boxd's own client uses them: 8 MiB per stream,
// 32 MiB for the connection, so a sender of file data does not wait for
// window updates.
const STREAM_WINDOW = 8 << 20;
const SESSION_WINDOW = 32 << 20;

/** `$BOXD_SOCKET`, else /run/boxd/boxd.sock (as boxctl). */
export function defaultSocket(): string {
  return process.env.BOXD_SOCKET || DEFAULT_SOCKET;
}

/** Options every call takes. */
export interface CallOpts {
  /**
   * Bounds the whole call, in milliseconds: when it passes, the call is
   * cancelled, boxd stops the work (a foreground command's tree is killed)
   * and DeadlineExceeded is thrown. Default: the Client's.
   */
  requestTimeoutMs?: number;
  /** Cancels the call (and boxd's work) when aborted; throws Cancelled. */
  signal?: AbortSignal;
}

export interface ClientOptions {
  /** boxd's Unix socket; default `$BOXD_SOCKET`, else /run/boxd/boxd.sock. */
  socket?: string;
  /** The default requestTimeoutMs of every call that does not give one. */
  requestTimeoutMs?: number;
  /**
   * A TCP listener of boxd's (boxd --listen), `https://HOST:PORT`; default
   * `$BOXD_HOST`. Every call then goes there over TLS, none to the socket.
   */
  host?: string;
  /** The bearer token sent on every call to host; default `$BOXD_TOKEN`. */
  token?: string;
  /** PEM file of a private CA trusted for host; default `$BOXD_TLS_CA`. */
  tlsCa?: string;
  /** A client certificate and its key (PEM files) for a boxd with --client-ca; default `$BOXD_TLS_CERT`, `$BOXD_TLS_KEY`. */
  tlsCert?: string;
  tlsKey?: string;
}

/** The TLS connection settings of a client with a host; the token is kept only in the header closure. */
interface Remote {
  url: string;
  tls: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  authorization?: string;
}

const MAX_TOKEN = 128; // boxd reads no longer token

function pem(file: string | undefined, setting: string, kind: string): Buffer | undefined {
  if (!file) return undefined;
  let data: Buffer;
  try {
    data = fs.readFileSync(file);
  } catch (e) {
    throw new InvalidArgument(`${setting}: ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  if (!data.includes("-----BEGIN ") || !data.includes(kind)) throw new InvalidArgument(`${setting}: ${file} holds no PEM ${kind}`);
  return data;
}

/** The listener to call, from the options, else BOXD_HOST and the rest; undefined without a host. */
function remote(o: ClientOptions): Remote | undefined {
  const env = process.env;
  const host = o.host || env.BOXD_HOST || "";
  if (!host) return undefined;
  const token = o.token || env.BOXD_TOKEN || "";
  const tlsCert = o.tlsCert || env.BOXD_TLS_CERT || undefined;
  const tlsKey = o.tlsKey || env.BOXD_TLS_KEY || undefined;
  let u: URL | undefined;
  try {
    u = new URL(host);
  } catch {
    u = undefined;
  }
  if (!u || u.protocol !== "https:" || !u.hostname || (u.pathname !== "" && u.pathname !== "/") || u.search || u.hash || u.username) {
    throw new InvalidArgument(`host: ${JSON.stringify(host)} is not https://HOST:PORT`);
  }
  if (!tlsCert !== !tlsKey) throw new InvalidArgument("tlsCert, tlsKey: a client certificate needs both (or neither)");
  if (!token && !tlsCert) {
    throw new InvalidArgument(`host: no token (token or $BOXD_TOKEN) and no client certificate (tlsCert, tlsKey) for ${u.origin}`);
  }
  // Never quote the token: it may be a secret pasted in the wrong place.
  if (token && (token.length > MAX_TOKEN || !/^[\x21-\x7e]+$/.test(token))) {
    throw new InvalidArgument(`token: not a boxd token (printable ASCII without spaces, at most ${MAX_TOKEN} characters)`);
  }
  const tls = {
    ca: pem(o.tlsCa || env.BOXD_TLS_CA, "tlsCa", "CERTIFICATE"),
    cert: pem(tlsCert, "tlsCert", "CERTIFICATE"),
    key: pem(tlsKey, "tlsKey", "PRIVATE KEY"),
  };
  return { url: u.origin, tls, authorization: token ? "Bearer " + token : undefined };
}

/**
 * A connection to one boxd. One per process is enough; the module-level
 * calls share defaultClient(). Idle, it does not keep Node from exiting.
 */
export class Client {
  /** boxd's Unix socket, or with a host the host's URL: where errors say the calls went. */
  readonly socket: string;
  /** The TCP listener's https://HOST:PORT, when the client has one. */
  readonly host: string | undefined;
  readonly requestTimeoutMs: number | undefined;
  /** The generated service clients, for calls the SDK does not wrap. */
  readonly sandbox: RpcClient<typeof SandboxService>;
  readonly files: RpcClient<typeof FileService>;
  readonly process: RpcClient<typeof ProcessService>;
  readonly events: RpcClient<typeof EventService>;
  readonly registry: RpcClient<typeof RegistryService>;
  readonly pool: RpcClient<typeof PoolService>;
  readonly code: RpcClient<typeof CodeService>;
  private readonly sessions: Http2SessionManager;
  /** @internal Opens an HTTP/2 stream for a hand-framed gRPC call (rawgrpc.ts). */
  readonly h2stream: StreamOpener;
  private readonly open = new Map<http2.ClientHttp2Stream, string>();
  /** Numbers the streams opened, so the tests can tell them apart. */
  private opened = 0;
  private readonly openSeq = new Map<http2.ClientHttp2Stream, number>();
  /** @internal Unary calls over HTTP/1.1 (http1.ts): exec's fast path. */
  readonly http1: UnaryPool;

  constructor(options: ClientOptions | string = {}) {
    const o = typeof options === "string" ? { socket: options } : options;
    const r = remote(o);
    this.host = r?.url;
    this.socket = r ? r.url : path.resolve(o.socket || defaultSocket());
    this.requestTimeoutMs = o.requestTimeoutMs;
    const socket = this.socket;
    // With a host nothing touches a socket: exec's HTTP/1.1 path is off.
    this.http1 = new UnaryPool(socket, r !== undefined);
    const settings = { initialWindowSize: STREAM_WINDOW, maxFrameSize: (1 << 24) - 1 };
    this.sessions = r
      ? new Http2SessionManager(r.url, {}, { ...r.tls, settings })
      : new Http2SessionManager(
          "http://localhost",
          {},
          {
            createConnection: () => {
              const s = net.connect(socket);
              s.setNoDelay?.(true);
              return s;
            },
            settings,
          },
        );
    const authorization = r?.authorization;
    const sessions = this.sessions;
    const open = this.open;
    const openSeq = this.openSeq;
    const widened = new WeakSet<http2.Http2Session>();
    // Every stream of this client, connect's and the SDK's own (rawgrpc.ts).
    const request = async (method: string, p: string, headers: http2.OutgoingHttpHeaders, options: Omit<http2.ClientSessionRequestOptions, "signal">) => {
      // The token goes on every call, the SDK's hand-framed ones included.
      if (authorization) headers = { ...headers, authorization };
      const stream = await sessions.request(method, p, headers, options);
      open.set(stream, p);
      openSeq.set(stream, ++this.opened);
      stream.once("close", () => {
        open.delete(stream);
        openSeq.delete(stream);
      });
      // A call cancelled with response data still buffered: Node destroys
      // a closed stream only once its readable side is consumed, and
      // nobody reads it any more, so its 'close' never comes and the
      // connection stays referenced (Node would not exit). Drop the data.
      const close = stream.close.bind(stream);
      stream.close = (code?: number, cb?: () => void) => {
        close(code, cb);
        stream.resume();
        // close() has sent the RST_STREAM (a non-zero code goes at
        // once); destroying the stream then ends it on our side.
        setImmediate(() => {
          if (!stream.destroyed) stream.destroy();
        });
      };
      // The connection's window can only be raised once it exists.
      const s = stream.session;
      if (s && !widened.has(s)) {
        widened.add(s);
        try {
          s.setLocalWindowSize(SESSION_WINDOW);
        } catch {
          // a session closing under us: the call reports it
        }
      }
      return stream;
    };
    this.h2stream = (p, headers) => request("POST", p, headers, {});
    const transport = createGrpcTransport({
      baseUrl: r ? r.url : "http://localhost",
      sessionManager: {
        authority: sessions.authority,
        request,
        notifyResponseByteRead(stream) {
          sessions.notifyResponseByteRead(stream);
        },
      },
      readMaxBytes: MAX_MESSAGE,
      writeMaxBytes: MAX_MESSAGE,
    });
    this.sandbox = createClient(SandboxService, transport);
    this.files = createClient(FileService, transport);
    this.process = createClient(ProcessService, transport);
    this.events = createClient(EventService, transport);
    this.registry = createClient(RegistryService, transport);
    this.pool = createClient(PoolService, transport);
    this.code = createClient(CodeService, transport);
  }

  /** Call options for connect: the deadline and the signal. */
  options(o: CallOpts | undefined, signal?: AbortSignal): CallOptions {
    const timeoutMs = o?.requestTimeoutMs ?? this.requestTimeoutMs;
    return { timeoutMs: timeoutMs && timeoutMs > 0 ? timeoutMs : undefined, signal: signal ?? o?.signal };
  }

  /** The deadline and signal of a hand-framed call (rawgrpc.ts). */
  callOpts(o: CallOpts | undefined): { timeoutMs?: number; signal?: AbortSignal } {
    const timeoutMs = o?.requestTimeoutMs ?? this.requestTimeoutMs;
    return { timeoutMs: timeoutMs && timeoutMs > 0 ? timeoutMs : undefined, signal: o?.signal };
  }

  /** Runs a unary or client-streaming call, mapping errors to typed ones. */
  async unary<T>(fn: (opts: CallOptions) => Promise<T>, o?: CallOpts): Promise<T> {
    try {
      return await fn(this.options(o));
    } catch (e) {
      throw fromError(e, this.socket);
    }
  }

  /**
   * Runs a server- or bidi-streaming call. The responses come with errors
   * mapped; leaving the iteration early (break, throw) or abort() cancels the
   * call, which resets its stream so boxd stops the work.
   */
  stream<T>(fn: (opts: CallOptions) => AsyncIterable<T>, o?: CallOpts): Stream<T> {
    return new Stream(this, fn, o);
  }

  /**
   * The methods of the HTTP/2 streams still open on this client's
   * connection, e.g. "/boxd.v1.ProcessService/Exec", and of the unary calls
   * in progress on its HTTP/1.1 connections (http1.ts). An open stream keeps
   * Node from exiting; every finished or cancelled call must have closed
   * its own (the tests check this).
   */
  openStreams(): string[] {
    return [...this.open.values(), ...this.http1.openCalls()];
  }

  /**
   * @internal The HTTP/2 streams still open, each as its method and its
   * number in the order this client opened them ("/boxd.v1.ProcessService/Exec#57"):
   * the tests name the test that opened a stream left open.
   */
  openStreamIds(): string[] {
    return [...this.open].map(([s, p]) => `${p}#${this.openSeq.get(s) ?? 0}`);
  }

  /** Closes the connection; calls after it open a new one. */
  close(): void {
    this.sessions.abort();
    this.http1.close();
  }
}

/** The responses of a streaming call (see Client.stream). */
export class Stream<T> implements AsyncIterable<T> {
  private readonly ac = new AbortController();
  private readonly it: AsyncIterator<T>;
  private readonly socket: string;
  private done = false;

  constructor(client: Client, fn: (opts: CallOptions) => AsyncIterable<T>, o?: CallOpts) {
    this.socket = client.socket;
    const user = o?.signal;
    if (user) {
      if (user.aborted) this.ac.abort(user.reason);
      else user.addEventListener("abort", () => this.ac.abort(user.reason), { once: true });
    }
    this.it = fn(client.options(o, this.ac.signal))[Symbol.asyncIterator]();
  }

  /** The next response, or undefined at the end. */
  async next(): Promise<T | undefined> {
    if (this.done) return undefined;
    try {
      const r = await this.it.next();
      if (r.done) {
        this.done = true;
        return undefined;
      }
      return r.value;
    } catch (e) {
      this.done = true;
      throw fromError(e, this.socket);
    }
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    try {
      for (;;) {
        const v = await this.next();
        if (v === undefined) return;
        yield v;
      }
    } finally {
      if (!this.done) this.abort();
    }
  }

  /** Cancels the call. */
  abort(): void {
    this.done = true;
    if (!this.ac.signal.aborted) this.ac.abort();
  }
}

let defaultInstance: Client | undefined;

/** The process-wide client on defaultSocket(), made on first use. */
export function defaultClient(): Client {
  defaultInstance ??= new Client();
  return defaultInstance;
}
