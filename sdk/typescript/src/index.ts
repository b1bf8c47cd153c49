// @boxd/sdk: run untrusted code in boxd sandboxes from TypeScript.
//
//   import { Sandbox } from "@boxd/sdk";
//   const sb = await Sandbox.create({ memory: "256m", ttl: "1h" });
//   const r = await sb.exec(["sh", "-c", "echo $((6*7))"], { timeout: 5 });
//   console.log(r.exitCode, r.stdoutText);
//   await sb.delete();
//
// The SDK talks gRPC to boxd's Unix socket ($BOXD_SOCKET, else
// /run/boxd/boxd.sock); see sdk/typescript/README.md.

export { Client, Stream, defaultClient, defaultSocket, DEFAULT_SOCKET, type CallOpts, type ClientOptions } from "./client.js";
export {
  AlreadyExists,
  BoxdError,
  Cancelled,
  DeadlineExceeded,
  FailedPrecondition,
  Internal,
  InvalidArgument,
  NotFound,
  PermissionDenied,
  Unauthenticated,
  ResourceExhausted,
  Unavailable,
  Unimplemented,
  Unknown,
  fromCode,
} from "./errors.js";
export { Files, Watch, type ReadOptions, type UploadItem, type UploadResult, type UserOpts, type WriteOptions } from "./files.js";
export {
  Execution,
  PIPE,
  Processes,
  Session,
  Sessions,
  type ByteSource,
  type Bytes,
  type CommandOptions,
  type OnOutput,
  type SessionExecOptions,
  type SessionOptions,
  type StartOptions,
  type Stdin,
} from "./process.js";
export {
  OutputStream,
  Sandbox,
  events,
  list,
  type CreateOptions,
  type EventsOptions,
  type ExecOptions,
  type ExecStreamOptions,
  type ForkOptions,
  type RegistryAuth,
  type UpdateOptions,
} from "./sandbox.js";
export { CodeOutput, type CodeError, type CodeResult, type RunCodeOptions } from "./code.js";
export * as images from "./images.js";
export type { BuildOptions, TransferOptions } from "./images.js";
export {
  ExecResult,
  SessionResult,
  type BuildResult,
  type BuildStep,
  type DownloadedFile,
  type EditResult,
  type GrepMatch,
  type Image,
  type Line,
  type Lines,
  type NetworkStatus,
  type PathStat,
  type Pool,
  type PublishedPort,
  type SearchResult,
  type TransferProgress,
  type Duration,
  type Env,
  type Event,
  type FileInfo,
  type FileKind,
  type FileResult,
  type Output,
  type ProcessInfo,
  type SandboxInfo,
  type SandboxStats,
  type Change,
  type Changes,
  type SessionInfo,
  type Usage,
  type WatchEvent,
  type WatchOpName,
} from "./types.js";

export const VERSION = "0.1.0";
