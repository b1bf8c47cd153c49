// Plain result types: the SDK's view of boxd's messages. 64-bit integers
// become numbers (sizes, pids and microseconds all fit in 2^53).

import type { ExecResult as PbExecResult, Sandbox as PbSandbox, SandboxStats as PbSandboxStats } from "./gen/boxd/v1/boxd_pb.js";
import type { Event as PbEvent } from "./gen/boxd/v1/events_pb.js";
import { FileType, WatchOp, type FileInfo as PbFileInfo, type FileResult as PbFileResult, type WatchEvent as PbWatchEvent } from "./gen/boxd/v1/files_pb.js";
import type { ProcessInfo as PbProcessInfo, Session as PbSession } from "./gen/boxd/v1/process_pb.js";
import { type BoxdError, fromCode } from "./errors.js";

const utf8 = new TextDecoder("utf-8");
const empty = new Uint8Array(0);

/**
 * A Go duration for boxd: a number of seconds, or a string passed as is
 * ("1h30m").
 */
export type Duration = number | string;

export function duration(d: Duration | undefined): string {
  if (d === undefined || d === null) return "";
  if (typeof d === "string") return d;
  if (!Number.isFinite(d) || d < 0) throw new RangeError(`a duration must be a non-negative number of seconds, got ${d}`);
  return `${Math.round(d * 1000)}ms`;
}

/** Environment: an object, or a list of K=V strings. */
export type Env = Record<string, string> | string[];

export function envList(env: Env | undefined): string[] {
  if (!env) return [];
  if (Array.isArray(env)) return [...env];
  return Object.entries(env).map(([k, v]) => `${k}=${v}`);
}

/** A string is a shell command (run with sh -c); an array is argv. */
export function argv(args: string | string[]): string[] {
  if (typeof args === "string") return ["sh", "-c", args];
  if (!Array.isArray(args) || args.length === 0) throw new TypeError("args must be a non-empty array or a shell command string");
  return [...args];
}

/** A piece of a command's output. */
export interface Output {
  stream: "stdout" | "stderr";
  data: Uint8Array;
}

/** How a command ended, with its output (bytes, exactly as produced). */
export class ExecResult {
  exitCode: number;
  stdout: Uint8Array;
  stderr: Uint8Array;
  timedOut: boolean;
  truncated: boolean;
  /** The signal that ended the command, e.g. "SIGKILL"; "" if it exited. */
  signal: string;
  startedAt: string;
  endedAt: string;
  userCpuUsec: number;
  systemCpuUsec: number;
  maxRssBytes: number;

  constructor(r: PbExecResult | undefined, stdout: Uint8Array = empty, stderr: Uint8Array = empty) {
    this.exitCode = r?.exitCode ?? 0;
    this.stdout = stdout;
    this.stderr = stderr;
    this.timedOut = r?.timedOut ?? false;
    this.truncated = r?.truncated ?? false;
    this.signal = r?.signal ?? "";
    this.startedAt = r?.startedAt ?? "";
    this.endedAt = r?.endedAt ?? "";
    this.userCpuUsec = Number(r?.userCpuUsec ?? 0n);
    this.systemCpuUsec = Number(r?.systemCpuUsec ?? 0n);
    this.maxRssBytes = Number(r?.maxRssBytes ?? 0n);
  }

  /** stdout as UTF-8; invalid bytes become U+FFFD. */
  get stdoutText(): string {
    return utf8.decode(this.stdout);
  }
  get stderrText(): string {
    return utf8.decode(this.stderr);
  }
  /** Exit code 0 and no timeout. */
  get ok(): boolean {
    return this.exitCode === 0 && !this.timedOut;
  }
}

/** A session command's result. */
export class SessionResult extends ExecResult {
  /** The shell was replaced after a timeout: its state is lost. */
  sessionRestarted = false;
  /** The shell exited (e.g. `exit`): the session is gone. */
  sessionEnded = false;
}

export interface Usage {
  memoryBytes: number;
  memoryPeakBytes: number;
  cpuUsec: number;
  pids: number;
  oomKills: number;
}

export interface SandboxInfo {
  id: string;
  name: string;
  image: string;
  /** running, stopped, unknown */
  state: string;
  memoryBytes: number;
  cpus: number;
  pids: number;
  env: string[];
  workdir: string;
  labels: Record<string, string>;
  createdAt: string;
  expiresAt: string;
  initRestarts: number;
  restartRefused: string;
  /** Live cgroup figures; only from Sandbox.info(). */
  usage?: Usage;
}

/** One sample of a sandbox's resource use (Sandbox.stats). */
export interface SandboxStats {
  id: string;
  name: string;
  state: string;
  memoryLimitBytes: number;
  usage?: Usage;
  /** CPU over the interval before the sample, in percent of one core. */
  cpuPercent: number;
}

/** One entry of boxd's event log (events()). */
export interface Event {
  seq: bigint;
  time: string;
  type: string;
  sandbox: string;
  attrs: Record<string, string>;
}

function usage(u: PbSandbox["usage"]): Usage | undefined {
  return u
    ? {
        memoryBytes: Number(u.memoryBytes),
        memoryPeakBytes: Number(u.memoryPeakBytes),
        cpuUsec: Number(u.cpuUsec),
        pids: Number(u.pids),
        oomKills: Number(u.oomKills),
      }
    : undefined;
}

export function sandboxStats(s: PbSandboxStats): SandboxStats {
  return { id: s.id, name: s.name, state: s.state, memoryLimitBytes: Number(s.memoryLimitBytes), usage: usage(s.usage), cpuPercent: s.cpuPercent };
}

export function event(e: PbEvent): Event {
  return { seq: e.seq, time: e.time, type: e.type, sandbox: e.sandbox, attrs: { ...e.attrs } };
}

export function sandboxInfo(s: PbSandbox | undefined): SandboxInfo {
  if (!s) throw new TypeError("boxd sent no sandbox");
  const u = s.usage;
  return {
    id: s.id,
    name: s.name,
    image: s.image,
    state: s.state,
    memoryBytes: Number(s.memoryBytes),
    cpus: s.cpus,
    pids: Number(s.pids),
    env: [...s.env],
    workdir: s.workdir,
    labels: { ...s.labels },
    createdAt: s.createdAt,
    expiresAt: s.expiresAt,
    initRestarts: s.initRestarts,
    restartRefused: s.restartRefused,
    usage: u
      ? {
          memoryBytes: Number(u.memoryBytes),
          memoryPeakBytes: Number(u.memoryPeakBytes),
          cpuUsec: Number(u.cpuUsec),
          pids: Number(u.pids),
          oomKills: Number(u.oomKills),
        }
      : undefined,
  };
}

export type FileKind = "file" | "dir" | "symlink" | "fifo" | "socket" | "char_device" | "block_device" | "unknown";

const kinds: Record<number, FileKind> = {
  [FileType.REGULAR]: "file",
  [FileType.DIRECTORY]: "dir",
  [FileType.SYMLINK]: "symlink",
  [FileType.FIFO]: "fifo",
  [FileType.SOCKET]: "socket",
  [FileType.CHAR_DEVICE]: "char_device",
  [FileType.BLOCK_DEVICE]: "block_device",
};

/** A file in a sandbox; mode is the permission bits (e.g. 0o644). */
export interface FileInfo {
  path: string;
  name: string;
  type: FileKind;
  size: number;
  mode: number;
  mtime: string;
  linkTarget: string;
  uid: number;
  gid: number;
  /** ListDir: why this directory's entries are missing. */
  error: string;
  isDir: boolean;
  isFile: boolean;
}

export function fileInfo(f: PbFileInfo | undefined): FileInfo {
  if (!f) throw new TypeError("boxd sent no file info");
  const type = kinds[f.type] ?? "unknown";
  return {
    path: f.path,
    name: f.name,
    type,
    size: Number(f.size),
    mode: f.mode,
    mtime: f.mtime,
    linkTarget: f.linkTarget,
    uid: f.uid,
    gid: f.gid,
    error: f.error,
    isDir: type === "dir",
    isFile: type === "file",
  };
}

/**
 * The outcome of one file of a bulk call: error is undefined on success,
 * else the typed error (not thrown) saying why it failed.
 */
export interface FileResult {
  index: number;
  path: string;
  size: number;
  error?: BoxdError;
  ok: boolean;
}

export function fileResult(r: PbFileResult): FileResult {
  const error = r.error ? fromCode(r.error.code, r.error.message) : undefined;
  return { index: r.index, path: r.path, size: Number(r.size), error, ok: !error };
}

/** One file of files.download: data is its content (empty when error). */
export interface DownloadedFile {
  index: number;
  path: string;
  data: Uint8Array;
  info?: FileInfo;
  error?: BoxdError;
  ok: boolean;
}

export type WatchOpName = "create" | "write" | "remove" | "rename" | "chmod" | "overflow" | "unknown";

const ops: Record<number, WatchOpName> = {
  [WatchOp.CREATE]: "create",
  [WatchOp.WRITE]: "write",
  [WatchOp.REMOVE]: "remove",
  [WatchOp.RENAME]: "rename",
  [WatchOp.CHMOD]: "chmod",
  [WatchOp.OVERFLOW]: "overflow",
};

/**
 * A change under a watched path. op "rename" has oldPath; "chmod" is
 * metadata; "overflow" means events were lost (rescan if it matters).
 */
export interface WatchEvent {
  path: string;
  op: WatchOpName;
  oldPath: string;
  isDir: boolean;
  message: string;
}

export function watchEvent(e: PbWatchEvent): WatchEvent {
  return { path: e.path, op: ops[e.op] ?? "unknown", oldPath: e.oldPath, isDir: e.isDir, message: e.message };
}

/**
 * A background process: state "running" or "exited"; result is set once
 * it has exited (without output: attach for that).
 */
export interface ProcessInfo {
  id: string;
  pid: number;
  args: string[];
  user: string;
  tty: boolean;
  stdinOpen: boolean;
  state: string;
  startedAt: string;
  result?: ExecResult;
  running: boolean;
}

export function processInfo(p: PbProcessInfo | undefined): ProcessInfo {
  if (!p) throw new TypeError("boxd sent no process");
  return {
    id: p.id,
    pid: Number(p.pid),
    args: [...p.args],
    user: p.user,
    tty: p.tty,
    stdinOpen: p.stdinOpen,
    state: p.state,
    startedAt: p.startedAt,
    result: p.result ? new ExecResult(p.result) : undefined,
    running: p.state === "running",
  };
}

export interface SessionInfo {
  name: string;
  shell: string;
  user: string;
  pid: number;
  createdAt: string;
  busy: boolean;
  commands: number;
  restarts: number;
}

export function sessionInfo(s: PbSession | undefined): SessionInfo {
  if (!s) throw new TypeError("boxd sent no session");
  return {
    name: s.name,
    shell: s.shell,
    user: s.user,
    pid: Number(s.pid),
    createdAt: s.createdAt,
    busy: s.busy,
    commands: Number(s.commands),
    restarts: Number(s.restarts),
  };
}

/** Joins pieces of bytes into one array (no copy for a single piece). */
export function concat(parts: Uint8Array[], total?: number): Uint8Array {
  if (parts.length === 0) return empty;
  if (parts.length === 1) return parts[0];
  const n = total ?? parts.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
