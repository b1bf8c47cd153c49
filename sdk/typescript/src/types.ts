// Plain result types: the SDK's view of boxd's messages. 64-bit integers
// become numbers (sizes, pids and microseconds all fit in 2^53).

import type {
  BuildImageResponse as PbBuildImageResponse,
  ExecResult as PbExecResult,
  Image as PbImage,
  NetworkStatus as PbNetworkStatus,
  PublishedPort as PbPublishedPort,
  Sandbox as PbSandbox,
  SandboxStats as PbSandboxStats,
  StatPathResponse as PbStatPathResponse,
} from "./gen/boxd/v1/boxd_pb.js";
import type { EditFileResponse as PbEditFileResponse, GrepMatch as PbGrepMatch, Line as PbLine, ReadLinesResponse as PbReadLinesResponse } from "./gen/boxd/v1/files_pb.js";
import type { Pool as PbPool } from "./gen/boxd/v1/pool_pb.js";
import type { TransferProgress as PbTransferProgress } from "./gen/boxd/v1/registry_pb.js";
import type { Event as PbEvent } from "./gen/boxd/v1/events_pb.js";
import { FileType, WatchOp, type FileInfo as PbFileInfo, type FileResult as PbFileResult, type WatchEvent as PbWatchEvent } from "./gen/boxd/v1/files_pb.js";
import type { ProcessInfo as PbProcessInfo, Session as PbSession } from "./gen/boxd/v1/process_pb.js";
import { type BoxdError, fromCode } from "./errors.js";
import { DiffChange, type DiffEntry as PbDiffEntry } from "./gen/boxd/v1/diff_pb.js";

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
  /** The command's process id in the sandbox. */
  pid: number;
  /** The command died of SIGKILL while the kernel's OOM killer killed a process of the sandbox. */
  oomKilled: boolean;
  /** The command's process from the init's fork to its reaping, as the init measured it. */
  processUsec: number;

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
    this.pid = Number(r?.pid ?? 0n);
    this.oomKilled = r?.oomKilled ?? false;
    this.processUsec = Number(r?.processUsec ?? 0n);
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
  /** Published ports (see Sandbox.publishPort). */
  ports: PublishedPort[];
  /** The network as boxd set it up; undefined if boxd sent none. */
  network?: NetworkStatus;
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
    ports: s.ports.map(publishedPort),
    network: s.network ? networkStatus(s.network) : undefined,
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

/** An image boxd stores; labels carry boxd's audit of who wrote the name. */
export interface Image {
  name: string;
  digest: string;
  size: number;
  createdAt: string;
  labels: Record<string, string>;
}

export function image(i: PbImage | undefined): Image {
  if (!i) throw new TypeError("boxd sent no image");
  return { name: i.name, digest: i.digest, size: Number(i.size), createdAt: i.createdAt, labels: { ...i.labels } };
}

/** One Dockerfile step of a build. */
export interface BuildStep {
  line: number;
  instruction: string;
  /** Taken from the step cache (no sandbox ran). */
  cached: boolean;
  durationMs: number;
}

/** What images.build made. */
export interface BuildResult {
  image: Image;
  steps: BuildStep[];
}

export function buildResult(r: PbBuildImageResponse): BuildResult {
  return {
    image: image(r.image),
    steps: r.steps.map((s) => ({ line: s.line, instruction: s.instruction, cached: s.cached, durationMs: Number(s.durationMs) })),
  };
}

/** A sandbox port reachable from the host at hostIp:hostPort. */
export interface PublishedPort {
  hostIp: string;
  hostPort: number;
  port: number;
  protocol: string;
}

export function publishedPort(p: PbPublishedPort | undefined): PublishedPort {
  if (!p) throw new TypeError("boxd sent no port");
  return { hostIp: p.hostIp, hostPort: p.hostPort, port: p.port, protocol: p.protocol || "tcp" };
}

/** A sandbox's network: mode "none" or "egress", the canonical allowlist, its addresses. */
export interface NetworkStatus {
  mode: string;
  allow: string[];
  address: string;
  gateway: string;
  dns: string;
}

export function networkStatus(n: PbNetworkStatus | undefined): NetworkStatus {
  if (!n) throw new TypeError("boxd sent no network");
  return { mode: n.mode, allow: [...n.allow], address: n.address, gateway: n.gateway, dns: n.dns };
}

/** An image's warm pool: target size, ready and starting members. */
export interface Pool {
  image: string;
  size: number;
  ready: number;
  starting: number;
  /** The members' runtime: "runc" or "gvisor". */
  runtime: string;
}

export function pool(p: PbPool | undefined): Pool {
  if (!p) throw new TypeError("boxd sent no pool");
  return { image: p.image, size: p.size, ready: p.ready, starting: p.starting, runtime: p.runtime };
}

/** How far a pull or push has come. */
export interface TransferProgress {
  phase: string;
  blobs: { digest: string; kind: string; size: number; done: number; status: string }[];
}

export function transferProgress(p: PbTransferProgress): TransferProgress {
  return {
    phase: p.phase,
    blobs: p.blobs.map((b) => ({ digest: b.digest, kind: b.kind, size: Number(b.size), done: Number(b.done), status: b.status })),
  };
}

/** A path as Sandbox.statPath sees it (the stat behind copyIn/copyOut). */
export interface PathStat {
  name: string;
  size: number;
  mode: number;
  isDir: boolean;
  mtime: string;
  linkTarget: string;
}

export function pathStat(r: PbStatPathResponse): PathStat {
  return { name: r.name, size: Number(r.size), mode: r.mode, isDir: r.isDir, mtime: r.mtime, linkTarget: r.linkTarget };
}

/** One line of a file: number is 1-based, text without the newline, cut if longer than the limit. */
export interface Line {
  number: number;
  text: string;
  cut: boolean;
}

function line(l: PbLine): Line {
  return { number: Number(l.number), text: l.text, cut: l.cut };
}

/** Lines of a file (Files.readLines); more: the file goes on from nextOffset. */
export interface Lines {
  lines: Line[];
  info?: FileInfo;
  more: boolean;
  nextOffset: number;
  /** A NUL byte in the file's first 8 KiB. */
  binary: boolean;
  /** The lines as `cat -n` prints them. */
  numbered(): string;
}

export function lines(r: PbReadLinesResponse): Lines {
  const ls = r.lines.map(line);
  return {
    lines: ls,
    info: r.info ? fileInfo(r.info) : undefined,
    more: r.moreLines,
    nextOffset: Number(r.nextOffset),
    binary: r.binary,
    numbered: () => ls.map((l) => `${String(l.number).padStart(6)}\t${l.text}\n`).join(""),
  };
}

/** What Files.edit did: replacements made, the line of the first, the file now. */
export interface EditResult {
  replacements: number;
  line: number;
  info?: FileInfo;
}

export function editResult(r: PbEditFileResponse): EditResult {
  return { replacements: r.replacements, line: Number(r.line), info: r.info ? fileInfo(r.info) : undefined };
}

/** A matching line; for a binary file one match with binary set (line 0, no text). */
export interface GrepMatch {
  path: string;
  line: number;
  text: string;
  cut: boolean;
  binary: boolean;
}

export function grepMatch(m: PbGrepMatch): GrepMatch {
  if (m.binary || !m.line) return { path: m.path, line: 0, text: "", cut: false, binary: m.binary };
  return { path: m.path, line: Number(m.line.number), text: m.line.text, cut: m.line.cut, binary: false };
}

/** Matches of Files.glob / Files.grep; truncated: the search stopped early (truncatedReason says why). */
export interface SearchResult<T> {
  matches: T[];
  truncated: boolean;
  truncatedReason: string;
}

/** One path changed in a sandbox's writable layer (Sandbox.diff): its new state, or its old one when deleted. */
export interface Change {
  /** A byte that is not UTF-8 shows as U+FFFD; rawPath has the bytes. */
  path: string;
  rawPath: Uint8Array;
  change: "added" | "modified" | "deleted" | "unknown";
  type: FileKind;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  linkTarget: string;
  /** With patch: the unified diff of a text file. */
  patch: string;
  /** Not text: listed without a patch. */
  binary: boolean;
  /** Over 1 MiB, or 16 MiB of patches in all: the patch is cut or left out. */
  patchTruncated: boolean;
}

/** What Sandbox.diff found, in path order. */
export interface Changes {
  entries: Change[];
  /** The listing stopped at 100,000 changes. */
  truncated: boolean;
  patchTruncated: boolean;
}

const changeKinds: Record<number, Change["change"]> = {
  [DiffChange.ADDED]: "added",
  [DiffChange.MODIFIED]: "modified",
  [DiffChange.DELETED]: "deleted",
};

export function change(e: PbDiffEntry): Change {
  return {
    path: e.path, rawPath: e.rawPath.length > 0 ? e.rawPath : new TextEncoder().encode(e.path),
    change: changeKinds[e.change] ?? "unknown", type: kinds[e.type] ?? "unknown", size: Number(e.size), mode: e.mode,
    uid: e.uid, gid: e.gid, linkTarget: e.linkTarget, patch: e.patch, binary: e.binary, patchTruncated: e.patchTruncated,
  };
}
