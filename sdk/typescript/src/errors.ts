// Typed errors for boxd's API codes.
//
// boxd maps every internal error to one API code (rpc.ToConnect on the
// daemon side); each code is one class here, so callers test what they mean
// (`e instanceof NotFound`) instead of parsing messages. The classes and
// their `code` strings are the Python SDK's.

import { Code, ConnectError } from "@connectrpc/connect";

/** Base class of every error the SDK throws for a failed call. */
export class BoxdError extends Error {
  /** The API code: "not_found", "invalid_argument", ... */
  readonly code: string;
  /** boxd's message, which names what was wrong. */
  readonly rawMessage: string;

  constructor(message: string, code?: string, options?: { cause?: unknown }) {
    const c = code ?? (new.target as unknown as { defaultCode?: string }).defaultCode ?? "unknown";
    super(`${c}: ${message}`, options);
    this.code = c;
    this.rawMessage = message;
    this.name = new.target.name;
  }
}

export class NotFound extends BoxdError {
  static defaultCode = "not_found";
}

/**
 * A request field was bad. `field` names it when boxd's message does (boxd
 * writes `limits.memory: "12xb" is not a size`), else it is undefined.
 */
export class InvalidArgument extends BoxdError {
  static defaultCode = "invalid_argument";
  readonly field: string | undefined;
  constructor(message: string, code?: string, options?: { cause?: unknown }) {
    super(message, code, options);
    this.field = fieldOf(message);
  }
}

export class AlreadyExists extends BoxdError {
  static defaultCode = "already_exists";
}
export class FailedPrecondition extends BoxdError {
  static defaultCode = "failed_precondition";
}
export class ResourceExhausted extends BoxdError {
  static defaultCode = "resource_exhausted";
}
/**
 * The call's requestTimeoutMs passed: the call was cancelled and boxd
 * stopped its work (a foreground command's process tree is killed).
 */
export class DeadlineExceeded extends BoxdError {
  static defaultCode = "deadline_exceeded";
}
/** boxd could not be reached (no daemon on the socket, or it went away). */
export class Unavailable extends BoxdError {
  static defaultCode = "unavailable";
}
export class PermissionDenied extends BoxdError {
  static defaultCode = "permission_denied";
}
/**
 * A TCP listener of boxd's refused the call's token (or certificate):
 * missing, unknown, expired or revoked. Also a PermissionDenied.
 */
export class Unauthenticated extends PermissionDenied {
  static defaultCode = "unauthenticated";
}
/** The call was cancelled by the caller (its AbortSignal). */
export class Cancelled extends BoxdError {
  static defaultCode = "canceled";
}
export class Unimplemented extends BoxdError {
  static defaultCode = "unimplemented";
}
export class Internal extends BoxdError {
  static defaultCode = "internal";
}
export class Unknown extends BoxdError {
  static defaultCode = "unknown";
}

type ErrorClass = new (message: string, code?: string, options?: { cause?: unknown }) => BoxdError;

const byConnectCode: Partial<Record<Code, ErrorClass>> = {
  [Code.NotFound]: NotFound,
  [Code.InvalidArgument]: InvalidArgument,
  [Code.OutOfRange]: InvalidArgument,
  [Code.AlreadyExists]: AlreadyExists,
  [Code.FailedPrecondition]: FailedPrecondition,
  [Code.Aborted]: FailedPrecondition,
  [Code.ResourceExhausted]: ResourceExhausted,
  [Code.DeadlineExceeded]: DeadlineExceeded,
  [Code.Unavailable]: Unavailable,
  [Code.PermissionDenied]: PermissionDenied,
  [Code.Unauthenticated]: Unauthenticated,
  [Code.Canceled]: Cancelled,
  [Code.Unimplemented]: Unimplemented,
  [Code.Internal]: Internal,
  [Code.DataLoss]: Internal,
};

/** The API codes by name, as boxd writes them in per-file results (FileError.code). */
const byName: Record<string, ErrorClass> = {
  not_found: NotFound,
  invalid_argument: InvalidArgument,
  already_exists: AlreadyExists,
  failed_precondition: FailedPrecondition,
  resource_exhausted: ResourceExhausted,
  deadline_exceeded: DeadlineExceeded,
  unavailable: Unavailable,
  permission_denied: PermissionDenied,
  unauthenticated: Unauthenticated,
  canceled: Cancelled,
  unimplemented: Unimplemented,
  internal: Internal,
};

// A leading "field.path: " in an invalid_argument message.
const FIELD = /^([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*|\[\d+\])*): /;

function fieldOf(message: string): string | undefined {
  return FIELD.exec(message)?.[1];
}

/** The error for an API code given by name (e.g. a bulk call's FileError). */
export function fromCode(code: string, message: string): BoxdError {
  const cls = byName[code] ?? Unknown;
  return new cls(message, code || undefined);
}

// Node's errors that mean the socket could not be reached or the daemon
// went away: the transport reports some as internal or aborted, but to a
// caller they all mean "boxd is not there".
const CONNECTION_CODES = new Set([
  "ENOENT",
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ENOTSOCK",
  "EACCES",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_SESSION_ERROR",
  "ERR_HTTP2_STREAM_CANCEL",
  "ERR_HTTP2_INVALID_SESSION",
  "ERR_STREAM_DESTROYED",
  "ERR_HTTP2_ERROR",
]);

function connectionCause(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && depth < 8; depth++) {
    const c = (e as { code?: unknown }).code;
    if (typeof c === "string" && CONNECTION_CODES.has(c)) return c;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Turns whatever a call threw into the matching typed error. */
export function fromError(err: unknown, socket: string): BoxdError {
  if (err instanceof BoxdError) return err;
  const ce = ConnectError.from(err);
  let cls = byConnectCode[ce.code] ?? Unknown;
  let message = ce.rawMessage;
  const nodeCode = connectionCause(ce.cause ?? err);
  if (nodeCode && ce.code !== Code.DeadlineExceeded && ce.code !== Code.Canceled) {
    cls = Unavailable;
  }
  if (cls === Unavailable) {
    message = `boxd is not reachable on ${socket}: ${message}`;
  }
  if (cls === DeadlineExceeded && /^the operation timed out$/i.test(message)) {
    message = "the call's requestTimeoutMs passed (boxd cancelled its work)";
  }
  return new cls(message, undefined, { cause: err });
}
