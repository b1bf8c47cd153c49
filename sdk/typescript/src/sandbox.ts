// Sandboxes: create, connect, list, delete, and run commands in them.

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { rawUnary } from "./rawgrpc.js";

const EXEC = "/boxd.v1.SandboxService/Exec";
import { defaultClient, type CallOpts, type Client } from "./client.js";
import { NotFound } from "./errors.js";
import { Files } from "./files.js";
import {
  CreateSandboxRequestSchema,
  DeleteSandboxRequestSchema,
  ExecRequestSchema,
  ExecResponseSchema,
  GetSandboxRequestSchema,
  LimitsSchema,
  ListSandboxesRequestSchema,
} from "./gen/boxd/v1/boxd_pb.js";
import { ProcessInputSchema } from "./gen/boxd/v1/process_pb.js";
import {
  Execution,
  Processes,
  Sessions,
  processSpec,
  toBytes,
  type CommandOptions,
  type OnOutput,
  type Stdin,
} from "./process.js";
import { ExecResult, argv, duration, envList, sandboxInfo, type Duration, type Env, type SandboxInfo } from "./types.js";

export interface CreateOptions extends CallOpts {
  /** Empty: the daemon's default image. */
  image?: string;
  /** "256m", "1g" or a number of bytes. */
  memory?: string | number;
  /** CPU quota in cores, e.g. 1.5. */
  cpus?: number;
  /** Maximum number of processes. */
  pids?: number;
  env?: Env;
  /** Default /workspace. */
  workdir?: string;
  labels?: Record<string, string>;
  /** Unique name; connect() takes it as well as the id. */
  name?: string;
  /** Seconds or a Go duration ("1h"); unset: the daemon's default. */
  ttl?: Duration;
  client?: Client;
}

export interface ExecOptions extends CommandOptions {
  /**
   * Bytes or text (then EOF), an (async) iterable of bytes such as a Node
   * Readable (streamed, then EOF); execStream also takes PIPE.
   */
  stdin?: Stdin;
  /** Bytes of stdout+stderr kept; 0: 16 MiB; then the result is truncated. */
  outputLimit?: number;
  /** Receive output as it arrives instead of collecting it into the result. */
  onStdout?: OnOutput;
  onStderr?: OnOutput;
}

export interface ExecStreamOptions extends CommandOptions {
  stdin?: Stdin;
  outputLimit?: number;
  /** A pseudo-terminal (all output arrives as stdout). */
  tty?: boolean;
}

/**
 * One sandbox. Make one with Sandbox.create() or Sandbox.connect().
 * `files`, `processes` and `sessions` hold the file, background-process
 * and session calls. `await using sb = await Sandbox.create()` deletes it
 * at the end of the block.
 */
export class Sandbox {
  readonly id: string;
  readonly client: Client;
  readonly files: Files;
  readonly processes: Processes;
  readonly sessions: Sessions;
  private last: SandboxInfo;

  constructor(info: SandboxInfo, client: Client) {
    this.id = info.id;
    this.client = client;
    this.last = info;
    this.files = new Files(this);
    this.processes = new Processes(this);
    this.sessions = new Sessions(this);
  }

  /** The name it was created with ("" if none). */
  get name(): string {
    return this.last.name;
  }

  /**
   * Creates and starts a sandbox. Unset fields take boxd's defaults (image:
   * the daemon's default image).
   */
  static async create(o: CreateOptions = {}): Promise<Sandbox> {
    const c = o.client ?? defaultClient();
    const req = create(CreateSandboxRequestSchema, {
      image: o.image ?? "",
      limits: create(LimitsSchema, {
        memory: o.memory === undefined ? "" : String(o.memory),
        cpus: o.cpus ?? 0,
        pids: BigInt(o.pids ?? 0),
      }),
      env: envList(o.env),
      workdir: o.workdir ?? "",
      labels: { ...(o.labels ?? {}) },
      name: o.name ?? "",
      ttl: duration(o.ttl),
    });
    const r = await c.unary((opts) => c.sandbox.createSandbox(req, opts), o);
    return new Sandbox(sandboxInfo(r.sandbox), c);
  }

  /** Reattaches to an existing sandbox by id or name; NotFound if it is gone. */
  static async connect(idOrName: string, o: CallOpts & { client?: Client } = {}): Promise<Sandbox> {
    const c = o.client ?? defaultClient();
    const r = await c.unary((opts) => c.sandbox.getSandbox(create(GetSandboxRequestSchema, { id: idOrName }), opts), o);
    return new Sandbox(sandboxInfo(r.sandbox), c);
  }

  /** Fresh details, with live cgroup usage. */
  async info(o?: CallOpts): Promise<SandboxInfo> {
    const c = this.client;
    const r = await c.unary((opts) => c.sandbox.getSandbox(create(GetSandboxRequestSchema, { id: this.id }), opts), o);
    this.last = sandboxInfo(r.sandbox);
    return this.last;
  }

  /** Deletes the sandbox and everything in it. */
  async delete(o?: CallOpts): Promise<void> {
    const c = this.client;
    await c.unary((opts) => c.sandbox.deleteSandbox(create(DeleteSandboxRequestSchema, { id: this.id }), opts), o);
  }

  /** For `await using`: deletes the sandbox (one already gone is fine). */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.delete();
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
  }

  /**
   * Runs a command and waits for it.
   *
   * args: an array (argv) or a string (run with `sh -c`). timeout: seconds
   * (or a Go duration) after which boxd kills the command's whole tree;
   * the result then has timedOut and exit code 124. Output is collected
   * into the result (bytes, exactly as produced; at most outputLimit bytes,
   * default 16 MiB, then truncated), or given to onStdout/onStderr as it
   * arrives. requestTimeoutMs / signal bound the whole call: boxd kills
   * the command and DeadlineExceeded / Cancelled is thrown.
   */
  async exec(args: string | string[], o: ExecOptions = {}): Promise<ExecResult> {
    const simple =
      (o.stdin === undefined || typeof o.stdin === "string" || o.stdin instanceof Uint8Array) && !o.onStdout && !o.onStderr && !o.user;
    if (simple) {
      // One unary call: the fastest path.
      const c = this.client;
      const req = create(ExecRequestSchema, {
        sandboxId: this.id,
        args: argv(args),
        env: envList(o.env),
        workdir: o.workdir ?? "",
        timeout: duration(o.timeout),
        stdin: o.stdin === undefined ? new Uint8Array(0) : toBytes(o.stdin as string | Uint8Array),
        outputLimit: BigInt(o.outputLimit ?? 0),
      });
      // Hand-framed on the same HTTP/2 session (rawgrpc.ts): connect's
      // per-call machinery costs several ms of CPU, most of this call's time.
      const raw = await rawUnary(c.h2stream, c.socket, EXEC, toBinary(ExecRequestSchema, req), c.callOpts(o));
      const r = fromBinary(ExecResponseSchema, raw);
      return new ExecResult(r.result, r.stdout, r.stderr);
    }
    const ex = this.execStream(args, o);
    try {
      return await ex.wait({ onStdout: o.onStdout, onStderr: o.onStderr });
    } finally {
      ex.cancel();
    }
  }

  /**
   * Starts a command and returns an Execution: iterate it (`for await`)
   * for output as it is produced, then read .result. stdin: bytes/text
   * (then EOF), an (async) iterable of bytes (streamed, then EOF) or PIPE
   * (write with .write(), end with .closeStdin()). cancel(), `await using`
   * or leaving the loop early kills the command.
   */
  execStream(args: string | string[], o: ExecStreamOptions = {}): Execution {
    const spec = processSpec(this.id, args, o);
    return new Execution(this, create(ProcessInputSchema, { event: { case: "start", value: spec } }), o.stdin, o, false);
  }
}

/** The sandboxes boxd knows (only those carrying all the given labels). */
export async function list(o: CallOpts & { labels?: Record<string, string>; client?: Client } = {}): Promise<SandboxInfo[]> {
  const c = o.client ?? defaultClient();
  const r = await c.unary((opts) => c.sandbox.listSandboxes(create(ListSandboxesRequestSchema, { labels: { ...(o.labels ?? {}) } }), opts), o);
  return r.sandboxes.map(sandboxInfo);
}
