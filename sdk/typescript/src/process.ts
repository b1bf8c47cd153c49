// Streaming commands, background processes and sessions.

import { create } from "@bufbuild/protobuf";
import type { Client, CallOpts, Stream } from "./client.js";
import { CHUNK } from "./client.js";
import { FailedPrecondition, NotFound, Unavailable } from "./errors.js";
import {
  AttachRequestSchema,
  CreateSessionRequestSchema,
  DeleteSessionRequestSchema,
  ListProcessesRequestSchema,
  ListSessionsRequestSchema,
  ProcessInputSchema,
  ProcessSpecSchema,
  SessionExecRequestSchema,
  SignalProcessRequestSchema,
  StartProcessRequestSchema,
  WaitProcessRequestSchema,
  WindowSizeSchema,
  type ProcessInput,
  type ProcessOutput,
  type ProcessSpec,
} from "./gen/boxd/v1/process_pb.js";
import { Queue } from "./queue.js";
import {
  ExecResult,
  SessionResult,
  argv,
  concat,
  duration,
  envList,
  processInfo,
  sessionInfo,
  type Duration,
  type Env,
  type Output,
  type ProcessInfo,
  type SessionInfo,
} from "./types.js";

/** Data for stdin or a file: bytes, text (UTF-8) or a (async) iterable of bytes. */
export type Bytes = Uint8Array | string;
export type ByteSource = Bytes | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

/**
 * PIPE as stdin: the caller writes with Execution.write() and ends with
 * closeStdin().
 */
export const PIPE: unique symbol = Symbol("boxd.PIPE");

/**
 * stdin of a streaming command: bytes or text (then EOF), an iterable or
 * async iterable of bytes (streamed, then EOF; a Node Readable is one), or
 * PIPE.
 */
export type Stdin = ByteSource | typeof PIPE;

export type OnOutput = (data: Uint8Array) => void | Promise<void>;

const utf8 = new TextEncoder();

export function toBytes(b: Bytes): Uint8Array {
  return typeof b === "string" ? utf8.encode(b) : b;
}

/** The part of a Sandbox the process calls need (avoids an import cycle). */
export interface SandboxRef {
  readonly id: string;
  readonly client: Client;
}

export interface CommandOptions extends CallOpts {
  env?: Env;
  workdir?: string;
  /** NAME, UID, NAME:GROUP or UID:GID in the sandbox; default root. */
  user?: string;
  /** Seconds (or a Go duration) after which boxd kills the whole tree: exit 124, timedOut. */
  timeout?: Duration;
}

export function processSpec(
  sandboxId: string,
  args: string | string[],
  o: CommandOptions & { stdin?: unknown; tty?: boolean; outputLimit?: number; keepStdinOpen?: boolean },
): ProcessSpec {
  const first = typeof o.stdin === "string" || o.stdin instanceof Uint8Array ? toBytes(o.stdin) : new Uint8Array(0);
  return create(ProcessSpecSchema, {
    sandboxId,
    args: argv(args),
    env: envList(o.env),
    workdir: o.workdir ?? "",
    user: o.user ?? "",
    timeout: duration(o.timeout),
    tty: o.tty ?? false,
    stdin: first,
    outputLimit: BigInt(o.outputLimit ?? 0),
    keepStdinOpen: o.keepStdinOpen ?? false,
  });
}

function isIterable(x: unknown): x is Iterable<Uint8Array> | AsyncIterable<Uint8Array> {
  return x != null && typeof x === "object" && (Symbol.asyncIterator in x || Symbol.iterator in x);
}

/**
 * A running command on a bidirectional stream (ProcessService.Exec or
 * Attach).
 *
 * Iterate it (`for await`) for Output pieces as they are produced; `result`
 * is set when the command has ended. write()/closeStdin() feed stdin (with
 * stdin PIPE), signal() and resize() reach the command while it runs.
 * cancel() (or `await using`, or leaving the iteration early) ends the
 * call: for a foreground command that kills its whole process tree; an
 * attached background process keeps running.
 */
export class Execution implements AsyncIterable<Output> {
  /** Set when the command has ended. */
  result: ExecResult | undefined;
  /** Attach: the process, as the first message described it. */
  process: ProcessInfo | undefined;
  private readonly input = new Queue<ProcessInput>();
  private readonly stream: Stream<ProcessOutput>;
  private finished = false;
  private iterating = false;
  private feedError: unknown;

  /** @internal use Sandbox.execStream or processes.attach */
  constructor(sb: SandboxRef, first: ProcessInput, stdin: Stdin | undefined, o: CallOpts | undefined, attach: boolean) {
    const c = sb.client;
    this.input.push(first);
    this.stream = attach
      ? c.stream((opts) => c.process.attach(this.input, opts), o)
      : c.stream((opts) => c.process.exec(this.input, opts), o);
    if (stdin === PIPE) return;
    if (stdin === undefined || typeof stdin === "string" || stdin instanceof Uint8Array) {
      if (!attach) this.closeStdin();
      return;
    }
    if (isIterable(stdin)) void this.feed(stdin);
  }

  /** @internal reads Attach's first message, the process. */
  async readProcess(): Promise<void> {
    const msg = await this.stream.next();
    if (msg?.event.case === "process") this.process = processInfo(msg.event.value);
    else if (msg === undefined) throw new Unavailable("the attach stream ended before describing the process");
  }

  private async feed(chunks: Iterable<Uint8Array> | AsyncIterable<Uint8Array>): Promise<void> {
    try {
      for await (const c of chunks as AsyncIterable<Uint8Array>) {
        if (this.finished) return;
        this.write(c);
      }
      if (!this.finished) this.closeStdin();
    } catch (e) {
      // The caller's stdin source failed: end the command rather than leave
      // it waiting for input that will not come.
      this.feedError = e;
      this.cancel();
    }
  }

  /** Sends bytes (or UTF-8 text) to the command's stdin (with stdin PIPE). */
  write(data: Bytes): void {
    const b = toBytes(data);
    for (let i = 0; i < b.length; i += CHUNK) {
      this.input.push(create(ProcessInputSchema, { event: { case: "stdin", value: b.subarray(i, i + CHUNK) } }));
    }
  }

  /** EOF on the command's stdin. */
  closeStdin(): void {
    this.input.push(create(ProcessInputSchema, { event: { case: "closeStdin", value: true } }));
  }

  /**
   * Sends a signal ("SIGINT", "INT" or "2") to the command's process
   * group; SIGKILL kills its whole tree.
   */
  signal(sig = "SIGINT"): void {
    this.input.push(create(ProcessInputSchema, { event: { case: "signal", value: sig } }));
  }

  /** A terminal's new size (tty commands). */
  resize(rows: number, cols: number): void {
    this.input.push(create(ProcessInputSchema, { event: { case: "resize", value: create(WindowSizeSchema, { rows, cols }) } }));
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Output> {
    if (this.iterating) throw new TypeError("an Execution can be iterated once");
    this.iterating = true;
    let normal = false;
    try {
      while (!this.finished) {
        const msg = await this.stream.next();
        if (msg === undefined) break;
        const ev = msg.event;
        if (ev.case === "stdout" || ev.case === "stderr") {
          yield { stream: ev.case, data: ev.value };
        } else if (ev.case === "result") {
          this.result = new ExecResult(ev.value);
          break;
        }
      }
      normal = true;
    } finally {
      this.finish(!normal);
    }
    if (this.feedError !== undefined) throw this.feedError;
    if (this.result === undefined && this.process === undefined) {
      throw new Unavailable("the stream ended without a result");
    }
  }

  /**
   * Reads the rest of the output and returns the result. Output goes to
   * the callbacks if given, else it is collected into the result.
   */
  async wait(o: { onStdout?: OnOutput; onStderr?: OnOutput } = {}): Promise<ExecResult> {
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    for await (const piece of this) {
      if (piece.stream === "stdout") {
        if (o.onStdout) await o.onStdout(piece.data);
        else out.push(piece.data);
      } else if (o.onStderr) await o.onStderr(piece.data);
      else err.push(piece.data);
    }
    if (this.result === undefined) {
      // attach with follow false on a running process: no result yet.
      throw new FailedPrecondition("the process is still running (attached without follow)");
    }
    this.result.stdout = concat(out);
    this.result.stderr = concat(err);
    return this.result;
  }

  private finish(cancel: boolean): void {
    if (this.finished) return;
    this.finished = true;
    this.input.end();
    if (cancel) this.stream.abort();
  }

  /** Ends the call (kills a foreground command's process tree). */
  cancel(): void {
    const was = this.finished;
    this.finish(true);
    if (was) this.stream.abort();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.cancel();
  }
}

export interface StartOptions extends CommandOptions {
  /** First stdin bytes. */
  stdin?: Bytes;
  /** Keep stdin open after `stdin` for attach to write to. */
  keepStdinOpen?: boolean;
  tty?: boolean;
}

/**
 * Background processes of one sandbox (`sb.processes`). They live in the
 * sandbox's init, so they outlive this client and boxd restarts.
 */
export class Processes {
  constructor(private readonly sb: SandboxRef) {}

  /** Starts a command in the background and returns at once. */
  async start(args: string | string[], o: StartOptions = {}): Promise<ProcessInfo> {
    const c = this.sb.client;
    const spec = processSpec(this.sb.id, args, o);
    const r = await c.unary((opts) => c.process.start(create(StartProcessRequestSchema, { spec }), opts), o);
    return processInfo(r.process);
  }

  async list(o?: CallOpts): Promise<ProcessInfo[]> {
    const c = this.sb.client;
    const r = await c.unary((opts) => c.process.list(create(ListProcessesRequestSchema, { sandboxId: this.sb.id }), opts), o);
    return r.processes.map(processInfo);
  }

  async get(processId: string, o?: CallOpts): Promise<ProcessInfo> {
    const p = (await this.list(o)).find((x) => x.id === processId);
    if (!p) throw new NotFound(`process "${processId}" not found in sandbox ${this.sb.id}`);
    return p;
  }

  /** Waits until the process has exited; its result is in .result. */
  async wait(processId: string, o?: CallOpts): Promise<ProcessInfo> {
    const c = this.sb.client;
    const req = create(WaitProcessRequestSchema, { sandboxId: this.sb.id, processId });
    return processInfo((await c.unary((opts) => c.process.wait(req, opts), o)).process);
  }

  /** Signals the process group (SIGKILL, the default: the whole tree). */
  async kill(processId: string, signal = "SIGKILL", o?: CallOpts): Promise<ProcessInfo> {
    const c = this.sb.client;
    const req = create(SignalProcessRequestSchema, { sandboxId: this.sb.id, processId, signal });
    return processInfo((await c.unary((opts) => c.process.signal(req, opts), o)).process);
  }

  /**
   * Connects to a process, running or exited: its buffered output, then
   * (with follow, the default) live output and the result. stdin PIPE
   * passes write()/closeStdin() on (if its stdin is open). Ending the
   * attachment leaves the process running.
   */
  async attach(processId: string, o: CallOpts & { stdin?: typeof PIPE; follow?: boolean } = {}): Promise<Execution> {
    const first = create(ProcessInputSchema, {
      event: {
        case: "attach",
        value: create(AttachRequestSchema, {
          sandboxId: this.sb.id,
          processId,
          stdin: o.stdin === PIPE,
          noFollow: o.follow === false,
        }),
      },
    });
    const ex = new Execution(this.sb, first, o.stdin, o, true);
    try {
      await ex.readProcess();
    } catch (e) {
      ex.cancel();
      throw e;
    }
    return ex;
  }
}

export interface SessionExecOptions extends CallOpts {
  /** Seconds or a Go duration; the command's processes are killed, the shell lives on. */
  timeout?: Duration;
  outputLimit?: number;
  onStdout?: OnOutput;
  onStderr?: OnOutput;
}

/** A named persistent shell: cd, export and functions persist between commands. */
export class Session {
  readonly name: string;
  constructor(
    private readonly sb: SandboxRef,
    readonly info: SessionInfo,
  ) {
    this.name = info.name;
  }

  /** Runs shell text in the session, as if typed at its prompt. */
  async exec(command: string, o: SessionExecOptions = {}): Promise<SessionResult> {
    const c = this.sb.client;
    const req = create(SessionExecRequestSchema, {
      sandboxId: this.sb.id,
      name: this.name,
      command,
      timeout: duration(o.timeout),
      outputLimit: BigInt(o.outputLimit ?? 0),
    });
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    for await (const msg of c.stream((opts) => c.process.sessionExec(req, opts), o)) {
      const ev = msg.event;
      if (ev.case === "stdout") {
        if (o.onStdout) await o.onStdout(ev.value);
        else out.push(ev.value);
      } else if (ev.case === "stderr") {
        if (o.onStderr) await o.onStderr(ev.value);
        else err.push(ev.value);
      } else if (ev.case === "result") {
        const r = new SessionResult(ev.value.result, concat(out), concat(err));
        r.sessionRestarted = ev.value.sessionRestarted;
        r.sessionEnded = ev.value.sessionEnded;
        return r;
      }
    }
    throw new Unavailable("the session stream ended without a result");
  }

  async delete(o?: CallOpts): Promise<void> {
    await new Sessions(this.sb).delete(this.name, o);
  }
}

export interface SessionOptions extends CallOpts {
  /** Default "sh"; any POSIX shell, e.g. bash. */
  shell?: string;
  user?: string;
  env?: Env;
  workdir?: string;
}

/** Named persistent shells of one sandbox (`sb.sessions`). */
export class Sessions {
  constructor(private readonly sb: SandboxRef) {}

  async create(name: string, o: SessionOptions = {}): Promise<Session> {
    const c = this.sb.client;
    const req = create(CreateSessionRequestSchema, {
      sandboxId: this.sb.id,
      name,
      shell: o.shell ?? "",
      user: o.user ?? "",
      env: envList(o.env),
      workdir: o.workdir ?? "",
    });
    const r = await c.unary((opts) => c.process.createSession(req, opts), o);
    return new Session(this.sb, sessionInfo(r.session));
  }

  async get(name: string, o?: CallOpts): Promise<Session> {
    const s = (await this.list(o)).find((x) => x.name === name);
    if (!s) throw new NotFound(`session "${name}" not found in sandbox ${this.sb.id}`);
    return new Session(this.sb, s);
  }

  async list(o?: CallOpts): Promise<SessionInfo[]> {
    const c = this.sb.client;
    const r = await c.unary((opts) => c.process.listSessions(create(ListSessionsRequestSchema, { sandboxId: this.sb.id }), opts), o);
    return r.sessions.map(sessionInfo);
  }

  async delete(name: string, o?: CallOpts): Promise<void> {
    const c = this.sb.client;
    await c.unary((opts) => c.process.deleteSession(create(DeleteSessionRequestSchema, { sandboxId: this.sb.id, name }), opts), o);
  }
}
