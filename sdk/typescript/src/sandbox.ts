// Sandboxes: create, connect, list, delete, and run commands in them.

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { rawUnary } from "./rawgrpc.js";

const EXEC = "/boxd.v1.SandboxService/Exec";
// The most stdin a streamed command's start message carries. boxd writes
// a start message's stdin over 64 KiB to the command alongside what comes
// after it on the stream (more stdin, or its end), not before.
const INLINE_STDIN = 64 << 10;
import { CHUNK, defaultClient, type CallOpts, type Client, type Stream } from "./client.js";
import { NotFound, Unknown } from "./errors.js";
import { deleteCodeContext, listCodeContexts, restartCodeContext, runCode, type CodeResult, type RunCodeOptions } from "./code.js";
import { Files, chunks } from "./files.js";
import {
  CommitSandboxRequestSchema,
  CopyInRequestSchema,
  CopyOutRequestSchema,
  ForkSandboxRequestSchema,
  NetworkRequestSchema,
  PublishPortRequestSchema,
  PublishedPortSchema,
  RegistryAuthSchema,
  StatPathRequestSchema,
  UnpublishPortRequestSchema,
  UpdateNetworkRequestSchema,
  type CopyInRequest,
  CreateSandboxRequestSchema,
  DeleteSandboxRequestSchema,
  ExecRequestSchema,
  ExecResponseSchema,
  type ExecStreamResponse,
  GetSandboxRequestSchema,
  LimitsSchema,
  ListSandboxesRequestSchema,
  PauseSandboxRequestSchema,
  StartSandboxRequestSchema,
  StatsRequestSchema,
  StopSandboxRequestSchema,
  UnpauseSandboxRequestSchema,
  UpdateSandboxRequestSchema,
} from "./gen/boxd/v1/boxd_pb.js";
import { ProcessInputSchema } from "./gen/boxd/v1/process_pb.js";
import {
  Execution,
  Processes,
  Sessions,
  processSpec,
  toBytes,
  type ByteSource,
  type CommandOptions,
  type OnOutput,
  type Stdin,
} from "./process.js";
import { EventsRequestSchema } from "./gen/boxd/v1/events_pb.js";
import { DiffSandboxRequestSchema } from "./gen/boxd/v1/diff_pb.js";
import {
  ExecResult,
  argv,
  change,
  type Changes,
  duration,
  envList,
  event,
  image,
  networkStatus,
  pathStat,
  publishedPort,
  sandboxInfo,
  sandboxStats,
  type Duration,
  type Image,
  type NetworkStatus,
  type Output,
  type PathStat,
  type PublishedPort,
  type Env,
  type Event,
  type SandboxInfo,
  type SandboxStats,
} from "./types.js";

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
  /** Sandbox ports (or full mappings) to reach from the host; see publishPort. */
  publish?: (number | Partial<PublishedPort>)[];
  /** An egress network with this allowlist; unset: no network (loopback only). */
  allow?: string[];
  /** "missing" or "always": pull the image from its registry first. */
  pull?: string;
  /** Credentials for that pull (that registry only, never stored). */
  auth?: RegistryAuth;
  /** Disk cap of the writable layer and /workspace, e.g. "2g"; "0": none. */
  disk?: string | number;
  /** "none" (loopback only) or "egress" (only the `allow` destinations); `allow` alone means egress. */
  network?: string;
  /** Pause or delete (`onIdle`) after this long without use, e.g. "15m"; "0": never. */
  idleTimeout?: Duration;
  /** "pause", "delete" or "checkpoint" (gVisor; implies `autoResume`). */
  onIdle?: string;
  /** Default user of exec, processes and files: NAME, UID, NAME:GROUP or UID:GID. */
  user?: string;
  /** Mount the root filesystem read-only (/workspace becomes a tmpfs). */
  readOnly?: boolean;
  /** PATH[:SIZE] tmpfs mounts, e.g. "/cache:8m". */
  tmpfs?: string[];
  /** NAME=VALUE rlimits: nofile, nproc, cpu (seconds), fsize (size). */
  ulimits?: string[];
  /** RFC 1123 host name; default the sandbox id. */
  hostname?: string;
  /** CPU weight under contention, 1-10000. */
  cpuWeight?: number;
  /** Memory protected from reclaim, e.g. "64m" (at most `memory`). */
  memoryLow?: string | number;
  /** Default timeout of exec in this sandbox, e.g. "120s". */
  execTimeout?: Duration;
  /** Default output cap of exec in this sandbox, in bytes. */
  outputLimit?: number;
  /** Delete a sandbox of the same name first (gracefully). */
  replace?: boolean;
  /** "runc" or "gvisor"; unset: the daemon's default. */
  runtime?: string;
  /** Start from the image even if a warm-pool sandbox could serve the create. */
  cold?: boolean;
  /** Named volumes to mount: "NAME:/PATH" or "NAME:/PATH:ro". */
  volumes?: string[];
  /** Host directories to mount: "HOST-PATH:/PATH[:ro][,noexec]" (boxd --allow-bind). */
  binds?: string[];
  /** Secrets brokered at egress, "NAME" or "NAME=ENVVAR": the sandbox holds placeholders (docs/secrets.md). */
  secrets?: string[];
  /** Calls restore the sandbox from its checkpoint (or resume it from a pause) first. */
  autoResume?: boolean;
  /** A public repository cloned into /workspace before create returns: "URL" or "URL#REF" (https, http or git://; needs network egress allowing the server and an image with git). */
  git?: string;
  /** With git: clone only the last N commits; unset: all. */
  gitDepth?: number;
  client?: Client;
}

function size(v: string | number | undefined): string {
  return v === undefined ? "" : String(v);
}

/**
 * The CreateSandboxRequest of `o` (sdk/create-options.json maps each
 * option to its field).
 * @internal
 */
export function createRequest(o: CreateOptions) {
  return create(CreateSandboxRequestSchema, {
    image: o.image ?? "",
    limits: create(LimitsSchema, {
      memory: size(o.memory),
      cpus: o.cpus ?? 0,
      pids: BigInt(o.pids ?? 0),
      disk: size(o.disk),
    }),
    env: envList(o.env),
    workdir: o.workdir ?? "",
    labels: { ...(o.labels ?? {}) },
    name: o.name ?? "",
    ttl: duration(o.ttl),
    publish: (o.publish ?? []).map((p) =>
      create(PublishedPortSchema, typeof p === "number" ? { port: p } : { hostIp: p.hostIp ?? "", hostPort: p.hostPort ?? 0, port: p.port ?? 0, protocol: p.protocol ?? "" }),
    ),
    // An allowlist alone means egress; network "none" with one is left for boxd to refuse.
    network: o.allow || o.network ? create(NetworkRequestSchema, { mode: o.network || "egress", allow: [...(o.allow ?? [])] }) : undefined,
    idleTimeout: duration(o.idleTimeout),
    onIdle: o.onIdle ?? "",
    pull: o.pull ?? "",
    registryAuth: registryAuth(o.auth),
    user: o.user ?? "",
    readOnlyRootfs: o.readOnly ?? false,
    tmpfs: [...(o.tmpfs ?? [])],
    ulimits: [...(o.ulimits ?? [])],
    hostname: o.hostname ?? "",
    cpuWeight: BigInt(o.cpuWeight ?? 0),
    memoryLow: size(o.memoryLow),
    execTimeout: duration(o.execTimeout),
    outputLimit: BigInt(o.outputLimit ?? 0),
    replace: o.replace ?? false,
    runtime: o.runtime ?? "",
    cold: o.cold ?? false,
    volumes: o.volumes ?? [],
    binds: o.binds ?? [],
    secrets: o.secrets ?? [],
    autoResume: o.autoResume ?? false,
    git: o.git ?? "",
    gitDepth: o.gitDepth ?? 0,
  });
}

/** A login to one registry: username and password, or an identity token. */
export interface RegistryAuth {
  username?: string;
  password?: string;
  identityToken?: string;
}

/** @internal */
export function registryAuth(a: RegistryAuth | undefined) {
  return a ? create(RegistryAuthSchema, { username: a.username ?? "", password: a.password ?? "", identityToken: a.identityToken ?? "" }) : undefined;
}

function limits(memory: string | number | undefined, cpus: number | undefined, pids: number | undefined) {
  return create(LimitsSchema, { memory: memory === undefined ? "" : String(memory), cpus: cpus ?? 0, pids: BigInt(pids ?? 0) });
}

/** What Sandbox.fork changes in the forks; unset fields keep the source's values. */
export interface ForkOptions extends CallOpts {
  /** How many forks; default one per name, or 1. At most 64. */
  count?: number;
  /** One unique name per fork. */
  names?: string[];
  memory?: string | number;
  cpus?: number;
  pids?: number;
  /** Added to the source's environment. */
  env?: Env;
  workdir?: string;
  /** Added to the source's labels. */
  labels?: Record<string, string>;
  ttl?: Duration;
  /** Give each fork a clone of each of the source's volumes (new volumes named VOLUME-FORKID, the caller's, charged to its disk quota). */
  cloneVolumes?: boolean;
  /** Mount the source's volumes as it does (only volumes created shared); default: read-only. */
  shareVolumes?: boolean;
  /** Fork the running processes and memory too, from a checkpoint (docs/checkpoint.md; refused where the runtime cannot). */
  withProcesses?: boolean;
}

/**
 * The ForkSandboxRequest of `o` for sandbox `id`.
 * @internal
 */
export function forkRequest(id: string, o: ForkOptions) {
  return create(ForkSandboxRequestSchema, {
    sandboxId: id,
    count: o.count ?? 0,
    names: [...(o.names ?? [])],
    limits: limits(o.memory, o.cpus, o.pids),
    env: envList(o.env),
    workdir: o.workdir ?? "",
    labels: { ...(o.labels ?? {}) },
    ttl: duration(o.ttl),
    cloneVolumes: o.cloneVolumes ?? false,
    shareVolumes: o.shareVolumes ?? false,
    withProcesses: o.withProcesses ?? false,
  });
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
    const req = createRequest(o);
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

  /**
   * Deletes the sandbox and everything in it: SIGTERM to every process,
   * SIGKILL after `timeout` (default 10 s; `force`: at once). `background`
   * returns once the sandbox is no one's (gone from lists, its name free)
   * and leaves the teardown to boxd.
   */
  async delete(o?: CallOpts & { timeout?: Duration; force?: boolean; background?: boolean }): Promise<void> {
    const c = this.client;
    const req = create(DeleteSandboxRequestSchema, {
      id: this.id,
      timeout: duration(o?.timeout),
      force: o?.force ?? false,
      background: o?.background ?? false,
    });
    await c.unary((opts) => c.sandbox.deleteSandbox(req, opts), o);
  }

  /**
   * Changes the running sandbox: ttl (a new lifetime from now) or extend
   * (added to the expiry), limits (written to the live cgroup), env (merged
   * over the environment of later commands) and workdir. Unset fields keep
   * their value; everything is validated before anything changes.
   */
  async update(u: UpdateOptions, o?: CallOpts): Promise<SandboxInfo> {
    const c = this.client;
    const req = create(UpdateSandboxRequestSchema, {
      sandboxId: this.id,
      ttl: duration(u.ttl),
      extend: duration(u.extend),
      limits: create(LimitsSchema, {
        memory: u.memory === undefined ? "" : String(u.memory),
        cpus: u.cpus ?? 0,
        pids: BigInt(u.pids ?? 0),
      }),
      env: envList(u.env),
      workdir: u.workdir ?? "",
    });
    this.last = sandboxInfo((await c.unary((opts) => c.sandbox.updateSandbox(req, opts), o)).sandbox);
    return this.last;
  }

  /**
   * Stops every process (SIGTERM, then SIGKILL after timeout, default 10 s);
   * files are kept and start() runs the sandbox again.
   */
  async stop(timeout?: Duration, o?: CallOpts): Promise<SandboxInfo> {
    const c = this.client;
    const req = create(StopSandboxRequestSchema, { sandboxId: this.id, timeout: duration(timeout) });
    this.last = sandboxInfo((await c.unary((opts) => c.sandbox.stopSandbox(req, opts), o)).sandbox);
    return this.last;
  }

  /** Starts a stopped sandbox again, on the same files. */
  async start(o?: CallOpts): Promise<SandboxInfo> {
    const c = this.client;
    const req = create(StartSandboxRequestSchema, { sandboxId: this.id });
    this.last = sandboxInfo((await c.unary((opts) => c.sandbox.startSandbox(req, opts), o)).sandbox);
    return this.last;
  }

  /** Freezes every process; commands are refused (FailedPrecondition) until unpause(). */
  async pause(o?: CallOpts): Promise<void> {
    const c = this.client;
    await c.unary((opts) => c.sandbox.pauseSandbox(create(PauseSandboxRequestSchema, { id: this.id }), opts), o);
  }

  /** Thaws a paused sandbox. */
  async unpause(o?: CallOpts): Promise<void> {
    const c = this.client;
    await c.unary((opts) => c.sandbox.unpauseSandbox(create(UnpauseSandboxRequestSchema, { id: this.id }), opts), o);
  }

  /** The same as unpause(). */
  resume(o?: CallOpts): Promise<void> {
    return this.unpause(o);
  }

  /** One sample of the sandbox's resource use. */
  async stats(o?: CallOpts): Promise<SandboxStats> {
    const c = this.client;
    const req = create(StatsRequestSchema, { ids: [this.id] });
    for await (const msg of c.stream((opts) => c.sandbox.stats(req, opts), o)) {
      for (const s of msg.sandboxes) return sandboxStats(s);
    }
    throw new Unknown(`boxd sent no stats for sandbox ${this.id}`);
  }

  /**
   * A sample every interval (default 1 s; 100 ms to 1 m) until the loop is
   * left or the sandbox is gone.
   */
  async *statsStream(interval?: Duration, o?: CallOpts): AsyncGenerator<SandboxStats> {
    const c = this.client;
    const req = create(StatsRequestSchema, { ids: [this.id], stream: true, interval: duration(interval) });
    for await (const msg of c.stream((opts) => c.sandbox.stats(req, opts), o)) {
      for (const s of msg.sandboxes) yield sandboxStats(s);
    }
  }

  /**
   * The files added, modified and deleted in the sandbox's writable layer
   * since it was created ("create", the default), forked ("fork"), or
   * committed as an image (its name); volumes are not included. patch adds
   * a unified diff of each changed text file.
   */
  async diff(o: CallOpts & { since?: string; patch?: boolean } = {}): Promise<Changes> {
    const c = this.client;
    const req = create(DiffSandboxRequestSchema, { sandboxId: this.id, since: o.since ?? "", patch: o.patch ?? false });
    const out: Changes = { entries: [], truncated: false, patchTruncated: false };
    let done = false;
    for await (const msg of c.stream((opts) => c.sandbox.diffSandbox(req, opts), o)) {
      out.entries.push(...msg.entries.map(change));
      out.truncated = msg.truncated;
      out.patchTruncated = msg.patchTruncated;
      done = msg.done;
    }
    if (!done) throw new Unknown(`the diff of sandbox ${this.id} ended early`);
    return out;
  }

  // -- images, forks, ports, network, tar copies ----------------------------

  /**
   * Makes an image named ref from the sandbox's files (its image's layers
   * plus its writable layer); the sandbox runs on. force replaces an image
   * of that name (else AlreadyExists).
   */
  async commit(ref: string, o: CallOpts & { message?: string; force?: boolean } = {}): Promise<Image> {
    const c = this.client;
    const req = create(CommitSandboxRequestSchema, { sandboxId: this.id, ref, message: o.message ?? "", force: o.force ?? false });
    return image((await c.unary((opts) => c.sandbox.commitSandbox(req, opts), o)).image);
  }

  /**
   * Makes new sandboxes whose files start as a copy of this one's; each
   * runs a fresh init (processes are not copied).
   */
  async fork(o: ForkOptions = {}): Promise<Sandbox[]> {
    const c = this.client;
    const req = forkRequest(this.id, o);
    const r = await c.unary((opts) => c.sandbox.forkSandbox(req, opts), o);
    return r.sandboxes.map((s) => new Sandbox(sandboxInfo(s), c));
  }

  /**
   * Makes the sandbox's 127.0.0.1:port reachable on the host at hostIp
   * (default 127.0.0.1):hostPort (0: a free port); returns the mapping with
   * the host port chosen.
   */
  async publishPort(port: number, o: CallOpts & { hostPort?: number; hostIp?: string } = {}): Promise<PublishedPort> {
    const c = this.client;
    const req = create(PublishPortRequestSchema, {
      sandboxId: this.id,
      port: create(PublishedPortSchema, { port, hostPort: o.hostPort ?? 0, hostIp: o.hostIp ?? "" }),
    });
    return publishedPort((await c.unary((opts) => c.sandbox.publishPort(req, opts), o)).port);
  }

  /**
   * Stops the published ports matching port and/or hostPort (0: any, not
   * both), with their connections; returns what was stopped. NotFound if
   * none matches.
   */
  async unpublishPort(port: number, o: CallOpts & { hostPort?: number } = {}): Promise<PublishedPort[]> {
    const c = this.client;
    const req = create(UnpublishPortRequestSchema, { sandboxId: this.id, port, hostPort: o.hostPort ?? 0 });
    return (await c.unary((opts) => c.sandbox.unpublishPort(req, opts), o)).ports.map(publishedPort);
  }

  /** The sandbox's published ports, as boxd has them now. */
  async ports(o?: CallOpts): Promise<PublishedPort[]> {
    return (await this.info(o)).ports;
  }

  /** Adds allow entries to and removes deny entries from an egress sandbox's allowlist, at once. */
  async updateNetwork(u: { allow?: string[]; deny?: string[] }, o?: CallOpts): Promise<NetworkStatus> {
    const c = this.client;
    const req = create(UpdateNetworkRequestSchema, { sandboxId: this.id, allow: [...(u.allow ?? [])], deny: [...(u.deny ?? [])] });
    return networkStatus((await c.unary((opts) => c.sandbox.updateNetwork(req, opts), o)).network);
  }

  /** Unpacks a tar stream at path in the sandbox, as `docker cp - SANDBOX:path`. */
  async copyIn(path: string, tar: ByteSource, o?: CallOpts): Promise<void> {
    const c = this.client;
    const id = this.id;
    async function* requests(): AsyncGenerator<CopyInRequest> {
      yield create(CopyInRequestSchema, { sandboxId: id, path });
      for await (const b of chunks(tar)) yield create(CopyInRequestSchema, { data: b });
    }
    await c.unary((opts) => c.sandbox.copyIn(requests(), opts), o);
  }

  /** A tar of path (a file or directory), in pieces as they arrive. */
  async *copyOutStream(path: string, o?: CallOpts): AsyncGenerator<Uint8Array> {
    const c = this.client;
    const req = create(CopyOutRequestSchema, { sandboxId: this.id, path });
    for await (const msg of c.stream((opts) => c.sandbox.copyOut(req, opts), o)) {
      if (msg.data.length) yield msg.data;
    }
  }

  /** A tar of path (a file or directory), whole. */
  async copyOut(path: string, o?: CallOpts): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    for await (const b of this.copyOutStream(path, o)) parts.push(b);
    return Buffer.concat(parts);
  }

  /** The path as copyIn/copyOut see it. */
  async statPath(path: string, o?: CallOpts): Promise<PathStat> {
    const c = this.client;
    return pathStat(await c.unary((opts) => c.sandbox.statPath(create(StatPathRequestSchema, { sandboxId: this.id, path }), opts), o));
  }

  /**
   * Runs a command over boxd's one-way ExecStream: iterate for Output
   * pieces as they are produced; .result is set once it ended. stdin is
   * sent whole up front (execStream for interactive input). Leaving the
   * loop early (or abort()) kills the command.
   */
  execOutput(args: string | string[], o: CommandOptions & { stdin?: string | Uint8Array; outputLimit?: number } = {}): OutputStream {
    const c = this.client;
    const req = create(ExecRequestSchema, {
      sandboxId: this.id,
      args: argv(args),
      env: envList(o.env),
      workdir: o.workdir ?? "",
      timeout: duration(o.timeout),
      stdin: o.stdin === undefined ? new Uint8Array(0) : toBytes(o.stdin),
      outputLimit: BigInt(o.outputLimit ?? 0),
    });
    return new OutputStream(c.stream((opts) => c.sandbox.execStream(req, opts), o));
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
    const stdin = typeof o.stdin === "string" || o.stdin instanceof Uint8Array ? toBytes(o.stdin) : o.stdin;
    // One Exec message holds stdin up to a CHUNK; more goes over the stream
    // in pieces (execStream).
    const simple =
      (stdin === undefined || (stdin instanceof Uint8Array && stdin.length <= CHUNK)) && !o.onStdout && !o.onStderr && !o.user;
    if (simple) {
      // One unary call: the fastest path.
      const c = this.client;
      const req = create(ExecRequestSchema, {
        sandboxId: this.id,
        args: argv(args),
        env: envList(o.env),
        workdir: o.workdir ?? "",
        timeout: duration(o.timeout),
        stdin: stdin ?? new Uint8Array(0),
        outputLimit: BigInt(o.outputLimit ?? 0),
      });
      // Over HTTP/1.1 on a kept connection (http1.ts): Node's http2 costs
      // about 1 ms of CPU per request, most of this call's time. With
      // every such connection busy, hand-framed gRPC on the HTTP/2 session
      // (rawgrpc.ts), which still skips connect's per-call layers.
      const body = toBinary(ExecRequestSchema, req);
      const opts = c.callOpts(o);
      const raw = await (c.http1.call(EXEC, body, opts) ?? rawUnary(c.h2stream, c.socket, EXEC, body, opts));
      const r = fromBinary(ExecResponseSchema, raw);
      return new ExecResult(r.result, r.stdout, r.stderr);
    }
    const ex = this.execStream(args, { ...o, stdin });
    try {
      return await ex.wait({ onStdout: o.onStdout, onStderr: o.onStderr });
    } finally {
      ex.cancel();
    }
  }

  /**
   * Runs Python code in the sandbox's interpreter (an IPython kernel per
   * context, made on first use; variables and imports persist between
   * calls): stdout and stderr, the last expression's value and every display
   * output as MIME bundles (a matplotlib figure as image/png), and the
   * exception it raised, if any. The image needs python3, ipykernel and
   * jupyter_client (FailedPrecondition otherwise); see docs/interpreter.md.
   */
  runCode(code: string, o: RunCodeOptions = {}): Promise<CodeResult> {
    return runCode(this.client, this.id, code, o);
  }

  /** The names of the sandbox's interpreter contexts. */
  codeContexts(o?: CallOpts): Promise<string[]> {
    return listCodeContexts(this.client, this.id, o);
  }

  /** Starts a context's kernel afresh (its state is gone). */
  restartCodeContext(context: string, o?: CallOpts): Promise<void> {
    return restartCodeContext(this.client, this.id, context, o);
  }

  /** Stops a context's kernel and forgets it. */
  deleteCodeContext(context: string, o?: CallOpts): Promise<void> {
    return deleteCodeContext(this.client, this.id, context, o);
  }

  /**
   * Starts a command and returns an Execution: iterate it (`for await`)
   * for output as it is produced, then read .result. stdin: bytes/text
   * (then EOF), an (async) iterable of bytes (streamed, then EOF) or PIPE
   * (write with .write(), end with .closeStdin()). cancel(), `await using`
   * or leaving the loop early kills the command.
   */
  execStream(args: string | string[], o: ExecStreamOptions = {}): Execution {
    // Bytes or text over INLINE_STDIN go as stdin messages of a CHUNK each
    // (boxd takes no message over 8 MiB), then EOF, none of it in the
    // start message.
    let stdin = o.stdin;
    let first: ExecStreamOptions = o;
    if (typeof stdin === "string" || stdin instanceof Uint8Array) {
      const b = toBytes(stdin);
      if (b.length > INLINE_STDIN) {
        first = { ...o, stdin: undefined };
        stdin = [b];
      }
    }
    const spec = processSpec(this.id, args, first);
    return new Execution(this, create(ProcessInputSchema, { event: { case: "start", value: spec } }), stdin, o, false);
  }
}

/** The output of Sandbox.execOutput; .result is set once the command ended. */
export class OutputStream implements AsyncIterable<Output> {
  result: ExecResult | undefined;

  constructor(private readonly stream: Stream<ExecStreamResponse>) {}

  async *[Symbol.asyncIterator](): AsyncIterator<Output> {
    for await (const msg of this.stream) {
      const e = msg.event;
      if (e.case === "result") this.result = new ExecResult(e.value);
      else if (e.case === "stdout" || e.case === "stderr") yield { stream: e.case, data: e.value };
    }
  }

  /** Reads to the end: the result with all the output collected. */
  async wait(): Promise<ExecResult> {
    const out: Record<string, Uint8Array[]> = { stdout: [], stderr: [] };
    for await (const o of this) out[o.stream].push(o.data);
    if (!this.result) throw new Unknown("boxd ended the exec stream without a result");
    this.result.stdout = Buffer.concat(out.stdout);
    this.result.stderr = Buffer.concat(out.stderr);
    return this.result;
  }

  /** Cancels the call (boxd kills the command). */
  abort(): void {
    this.stream.abort();
  }
}

/** The sandboxes boxd knows (only those carrying all the given labels). */
export async function list(o: CallOpts & { labels?: Record<string, string>; client?: Client } = {}): Promise<SandboxInfo[]> {
  const c = o.client ?? defaultClient();
  const r = await c.unary((opts) => c.sandbox.listSandboxes(create(ListSandboxesRequestSchema, { labels: { ...(o.labels ?? {}) } }), opts), o);
  return r.sandboxes.map(sandboxInfo);
}

/** What Sandbox.update changes; unset fields keep their value. */
export interface UpdateOptions {
  /** A new lifetime from now (seconds or a Go duration such as "2h"). */
  ttl?: Duration;
  /** Added to the current expiry (not with ttl). */
  extend?: Duration;
  memory?: string | number;
  cpus?: number;
  pids?: number;
  /** Merged over the environment of later commands. */
  env?: Env;
  /** The working directory of later commands. */
  workdir?: string;
}

export interface EventsOptions extends CallOpts {
  /** An RFC 3339 time, or a Go duration meaning that long ago ("10m"); unset: only new events. */
  since?: string;
  /** "type=paused", "sandbox=ID" (as boxctl events --filter). */
  filters?: string[];
  /** Keep yielding new events as they happen until the loop is left. */
  follow?: boolean;
  client?: Client;
}

/** boxd's event log (what `boxctl events` shows). */
export async function* events(o: EventsOptions = {}): AsyncGenerator<Event> {
  const c = o.client ?? defaultClient();
  const req = create(EventsRequestSchema, { since: o.since ?? "", filters: [...(o.filters ?? [])], follow: o.follow ?? false });
  for await (const msg of c.stream((opts) => c.events.events(req, opts), o)) {
    if (msg.event) yield event(msg.event);
  }
}
