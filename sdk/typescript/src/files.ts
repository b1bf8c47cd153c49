// Files inside a sandbox (`sb.files`), over boxd's FileService.
//
// File data travels as binary protobuf in 1 MiB messages, never as JSON or
// base64. Paths are the sandbox's: relative ones start at its workdir.

import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { CallOpts, Stream } from "./client.js";
import { CHUNK } from "./client.js";
import { Internal, NotFound, fromCode } from "./errors.js";
import {
  ChmodPathRequestSchema,
  ChownPathRequestSchema,
  DownloadFilesRequestSchema,
  EditFileRequestSchema,
  GlobRequestSchema,
  GrepRequestSchema,
  ReadLinesRequestSchema,
  ListDirRequestSchema,
  MakeDirRequestSchema,
  ReadFileRequestSchema,
  RemovePathRequestSchema,
  RenamePathRequestSchema,
  StatFileRequestSchema,
  UploadFileSchema,
  UploadFilesRequestSchema,
  WatchPathRequestSchema,
  WriteFileRequestSchema,
  WriteFileResponseSchema,
  type UploadFilesRequest,
  type WatchPathResponse,
} from "./gen/boxd/v1/files_pb.js";
import { toBytes, type ByteSource, type SandboxRef } from "./process.js";
import { FieldSplitter, RawCall, dataHeader, enveloped, readOne } from "./rawgrpc.js";
import {
  concat,
  editResult,
  fileInfo,
  grepMatch,
  lines,
  type EditResult,
  type GrepMatch,
  type Lines,
  type SearchResult,
  fileResult,
  watchEvent,
  type DownloadedFile,
  type FileInfo,
  type FileResult,
  type WatchEvent,
} from "./types.js";

const utf8 = new TextDecoder("utf-8", { fatal: true });

const WRITE_FILE = "/boxd.v1.FileService/WriteFile";
const READ_FILE = "/boxd.v1.FileService/ReadFile";
const WRITE_DATA = 9; // WriteFileRequest.data
const READ_DATA = 2; // ReadFileResponse.data
const EMPTY = new Uint8Array(0);



/** Pieces of at most CHUNK bytes (views, not copies) of any ByteSource. */
export async function* chunks(data: ByteSource): AsyncGenerator<Uint8Array> {
  if (typeof data === "string" || data instanceof Uint8Array) {
    const b = toBytes(data);
    for (let i = 0; i < b.length; i += CHUNK) yield b.subarray(i, i + CHUNK);
    return;
  }
  for await (const piece of data as AsyncIterable<Uint8Array | string>) {
    const b = typeof piece === "string" ? toBytes(piece) : piece;
    if (!(b instanceof Uint8Array)) throw new TypeError("file data must be bytes (Uint8Array/Buffer) or strings");
    for (let i = 0; i < b.length; i += CHUNK) yield b.subarray(i, i + CHUNK);
  }
}

export interface UserOpts extends CallOpts {
  /** NAME, UID, NAME:GROUP or UID:GID in the sandbox; default root. */
  user?: string;
}

export interface WriteOptions extends UserOpts {
  /** Permission bits applied exactly (e.g. 0o755); default 0644 new, old mode replaced. */
  mode?: number;
  /** Create missing parent directories. */
  parents?: boolean;
  /** Truncate and write the existing file (keeps its inode); not atomic. */
  inPlace?: boolean;
  append?: boolean;
  /** AlreadyExists if the file exists. */
  exclusive?: boolean;
}

export interface ReadOptions extends UserOpts {
  offset?: number;
  /** 0: to the end of the file. */
  length?: number;
  /** FailedPrecondition if the path is a symlink. */
  noFollow?: boolean;
}

/**
 * One file to upload: `[path, data]`, `[path, data, mode]` or an object.
 */
export type UploadItem = [string, ByteSource] | [string, ByteSource, number] | { path: string; data: ByteSource; mode?: number };

/** One FileResult per file, in order. */
export interface UploadResult {
  results: FileResult[];
  filesWritten: number;
  bytesWritten: number;
  /** Every file was written. */
  ok: boolean;
  failed: FileResult[];
}

/**
 * Changes under a path, from files.watch(): iterate it (`for await`) for
 * WatchEvents; close() ends the watch. It is in place when watch() returns.
 */
export class Watch implements AsyncIterable<WatchEvent> {
  private pending: WatchEvent[];

  /** @internal */
  constructor(
    private readonly stream: Stream<WatchPathResponse>,
    first: WatchPathResponse,
  ) {
    this.pending = first.events.map(watchEvent);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<WatchEvent> {
    try {
      while (this.pending.length) yield this.pending.shift()!;
      for (;;) {
        const msg = await this.stream.next();
        if (msg === undefined) return;
        for (const e of msg.events) yield watchEvent(e);
      }
    } finally {
      // Leaving the loop (break, throw, or the stream's end) ends the watch.
      this.close();
    }
  }

  close(): void {
    this.stream.abort();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }
}

export class Files {
  constructor(private readonly sb: SandboxRef) {}

  private get c() {
    return this.sb.client;
  }

  // -- whole files ----------------------------------------------------------

  /**
   * Writes a file: an atomic replace unless inPlace/append. data is bytes,
   * text (UTF-8), or an (async) iterable of bytes such as a Node Readable
   * (streamed, so memory stays bounded).
   */
  async write(path: string, data: ByteSource, o: WriteOptions = {}): Promise<FileInfo> {
    // Hand-framed (rawgrpc.ts): each data message is a small header plus
    // the caller's own bytes, not a copy.
    const c = this.c;
    const head = toBinary(
      WriteFileRequestSchema,
      create(WriteFileRequestSchema, {
        sandboxId: this.sb.id,
        path,
        user: o.user ?? "",
        mode: o.mode,
        parents: o.parents ?? false,
        inPlace: o.inPlace ?? false,
        append: o.append ?? false,
        exclusive: o.exclusive ?? false,
      }),
    );
    const call = await RawCall.open(c.h2stream, c.socket, WRITE_FILE, c.callOpts(o));
    const body = readOne(call);
    // Read while writing: an early answer (an error) ends the writes; until
    // awaited below, its rejection is not unhandled.
    body.catch(() => undefined);
    try {
      let prefix: Uint8Array = head;
      for await (const piece of chunks(data)) {
        await call.write(dataHeader(prefix, WRITE_DATA, piece.length), piece);
        prefix = EMPTY;
      }
      if (prefix === head) await call.write(enveloped(head));
    } catch (e) {
      // The caller's data source failed: end the call rather than leave a
      // half-written file behind.
      call.cancel(e);
      await body.catch(() => undefined);
      throw e;
    }
    call.endRequest();
    const msg = await body;
    return fileInfo(fromBinary(WriteFileResponseSchema, msg).info);
  }

  /** Writes text as UTF-8. */
  writeText(path: string, text: string, o: WriteOptions = {}): Promise<FileInfo> {
    return this.write(path, text, o);
  }

  /**
   * The file's bytes in pieces, as they arrive (memory stays bounded).
   * Leaving the loop early cancels the read.
   */
  async *readStream(path: string, o: ReadOptions = {}): AsyncGenerator<Uint8Array> {
    // Hand-framed (rawgrpc.ts): the pieces are views of what the HTTP/2
    // stream delivered, not copies assembled into 1 MiB messages.
    const c = this.c;
    const req = create(ReadFileRequestSchema, {
      sandboxId: this.sb.id,
      path,
      user: o.user ?? "",
      offset: BigInt(o.offset ?? 0),
      length: BigInt(o.length ?? 0),
      noFollow: o.noFollow ?? false,
    });
    const call = await RawCall.open(c.h2stream, c.socket, READ_FILE, c.callOpts(o));
    let done = false;
    try {
      call.sendLast(enveloped(toBinary(ReadFileRequestSchema, req)));
      let out: Uint8Array[] = [];
      const split = new FieldSplitter(READ_DATA, (b) => out.push(b), () => undefined);
      for await (const chunk of call.chunks()) {
        split.push(chunk);
        if (out.length) {
          const ready = out;
          out = [];
          for (const p of ready) yield p;
        }
      }
      if (!split.atBoundary) throw new Internal("boxd's ReadFile answer ended inside a message");
      call.finish();
      done = true;
    } finally {
      // Leaving the loop early (break, throw) cancels the read in boxd.
      if (!done) call.close();
    }
  }

  /** The file's content (or length bytes from offset; 0: to the end). */
  async read(path: string, o: ReadOptions = {}): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    let n = 0;
    for await (const p of this.readStream(path, o)) {
      parts.push(p);
      n += p.length;
    }
    return concat(parts, n);
  }

  /** The file as text (UTF-8; invalid UTF-8 throws a TypeError). */
  async readText(path: string, o: ReadOptions = {}): Promise<string> {
    return utf8.decode(await this.read(path, o));
  }

  // -- metadata ---------------------------------------------------------------

  async stat(path: string, o: UserOpts & { follow?: boolean } = {}): Promise<FileInfo> {
    const c = this.c;
    const req = create(StatFileRequestSchema, { sandboxId: this.sb.id, path, user: o.user ?? "", follow: o.follow ?? false });
    return fileInfo((await c.unary((opts) => c.files.statFile(req, opts), o)).info);
  }

  async exists(path: string, o: UserOpts = {}): Promise<boolean> {
    try {
      await this.stat(path, o);
      return true;
    } catch (e) {
      if (e instanceof NotFound) return false;
      throw e;
    }
  }

  /**
   * A directory's entries (paths relative to it), depth first and sorted by
   * name; depth < 0 lists everything (at most 64 levels).
   */
  async list(path = ".", o: UserOpts & { depth?: number } = {}): Promise<FileInfo[]> {
    const c = this.c;
    const req = create(ListDirRequestSchema, { sandboxId: this.sb.id, path, user: o.user ?? "", depth: o.depth ?? 1 });
    const out: FileInfo[] = [];
    for await (const msg of c.stream((opts) => c.files.listDir(req, opts), o)) {
      for (const e of msg.entries) out.push(fileInfo(e));
    }
    return out;
  }

  async mkdir(path: string, o: UserOpts & { parents?: boolean; mode?: number } = {}): Promise<void> {
    const c = this.c;
    const req = create(MakeDirRequestSchema, { sandboxId: this.sb.id, path, user: o.user ?? "", parents: o.parents ?? false, mode: o.mode });
    await c.unary((opts) => c.files.makeDir(req, opts), o);
  }

  /** Removes a file, a symlink or an empty directory; recursive: a whole tree. */
  async rm(path: string, o: UserOpts & { recursive?: boolean } = {}): Promise<void> {
    const c = this.c;
    const req = create(RemovePathRequestSchema, { sandboxId: this.sb.id, path, user: o.user ?? "", recursive: o.recursive ?? false });
    await c.unary((opts) => c.files.removePath(req, opts), o);
  }

  async mv(src: string, dst: string, o: UserOpts & { noOverwrite?: boolean } = {}): Promise<void> {
    const c = this.c;
    const req = create(RenamePathRequestSchema, { sandboxId: this.sb.id, src, dst, user: o.user ?? "", noOverwrite: o.noOverwrite ?? false });
    await c.unary((opts) => c.files.renamePath(req, opts), o);
  }

  async chmod(path: string, mode: number, o: UserOpts = {}): Promise<void> {
    const c = this.c;
    const req = create(ChmodPathRequestSchema, { sandboxId: this.sb.id, path, user: o.user ?? "", mode });
    await c.unary((opts) => c.files.chmodPath(req, opts), o);
  }

  // -- agent helpers: done inside the sandbox, only the answer comes back --

  /**
   * Lines of a text file from line offset+1 (at most limit, default 2000),
   * numbered: .numbered() prints them like `cat -n`. Long lines are cut at
   * maxLineBytes (default 4096); .more and .nextOffset say where to read on.
   */
  async readLines(path: string, o: UserOpts & { offset?: number; limit?: number; maxLineBytes?: number } = {}): Promise<Lines> {
    const c = this.c;
    const req = create(ReadLinesRequestSchema, {
      sandboxId: this.sb.id,
      path,
      user: o.user ?? "",
      offset: BigInt(o.offset ?? 0),
      limit: o.limit ?? 0,
      maxLineBytes: o.maxLineBytes ?? 0,
    });
    return lines(await c.unary((opts) => c.files.readLines(req, opts), o));
  }

  /**
   * Replaces the exact text oldText by newText: it must occur exactly once
   * (FailedPrecondition if missing or repeated; nothing changes) unless
   * replaceAll. The file is rewritten atomically, keeping owner and mode.
   */
  async edit(path: string, oldText: string, newText: string, o: UserOpts & { replaceAll?: boolean } = {}): Promise<EditResult> {
    const c = this.c;
    const req = create(EditFileRequestSchema, {
      sandboxId: this.sb.id,
      path,
      user: o.user ?? "",
      oldString: oldText,
      newString: newText,
      replaceAll: o.replaceAll ?? false,
    });
    return editResult(await c.unary((opts) => c.files.editFile(req, opts), o));
  }

  /**
   * FileInfos of the paths matching pattern ("*", "?", "[...]" in a name,
   * "**" for any directories), relative to path (default: the workdir)
   * unless absolute. Symlinks below are listed, never entered.
   */
  async glob(pattern: string, o: UserOpts & { path?: string; limit?: number } = {}): Promise<SearchResult<FileInfo>> {
    const c = this.c;
    const req = create(GlobRequestSchema, { sandboxId: this.sb.id, pattern, path: o.path ?? "", user: o.user ?? "", limit: o.limit ?? 0 });
    const r = await c.unary((opts) => c.files.glob(req, opts), o);
    return { matches: r.matches.map(fileInfo), truncated: r.truncated, truncatedReason: r.truncatedReason };
  }

  /**
   * The lines matching pattern (RE2; literal for plain text) in a file or
   * below a directory (default: the workdir), only in files whose name (or
   * relative path, with "/") matches glob.
   */
  async grep(
    pattern: string,
    o: UserOpts & { path?: string; glob?: string; ignoreCase?: boolean; literal?: boolean; limit?: number; maxLineBytes?: number } = {},
  ): Promise<SearchResult<GrepMatch>> {
    const c = this.c;
    const req = create(GrepRequestSchema, {
      sandboxId: this.sb.id,
      pattern,
      path: o.path ?? "",
      glob: o.glob ?? "",
      user: o.user ?? "",
      limit: o.limit ?? 0,
      ignoreCase: o.ignoreCase ?? false,
      literal: o.literal ?? false,
      maxLineBytes: o.maxLineBytes ?? 0,
    });
    const r = await c.unary((opts) => c.files.grep(req, opts), o);
    return { matches: r.matches.map(grepMatch), truncated: r.truncated, truncatedReason: r.truncatedReason };
  }

  /**
   * Sets the owner: "USER", "USER:GROUP", "USER:" (the user's login group)
   * or ":GROUP", names or ids of the sandbox. A final symlink is refused;
   * recursive never follows symlinks in the tree.
   */
  async chown(path: string, owner: string, o: UserOpts & { recursive?: boolean } = {}): Promise<void> {
    const c = this.c;
    const req = create(ChownPathRequestSchema, { sandboxId: this.sb.id, path, owner, user: o.user ?? "", recursive: o.recursive ?? false });
    await c.unary((opts) => c.files.chownPath(req, opts), o);
  }

  /**
   * Watches a directory (or one file) for changes until closed or the path
   * goes away; recursive watches the directories below too (at most 8192).
   */
  async watch(path: string, o: UserOpts & { recursive?: boolean } = {}): Promise<Watch> {
    const c = this.c;
    const req = create(WatchPathRequestSchema, { sandboxId: this.sb.id, path, user: o.user ?? "", recursive: o.recursive ?? false });
    const s = c.stream((opts) => c.files.watchPath(req, opts), o);
    let first: WatchPathResponse | undefined;
    try {
      first = await s.next();
    } catch (e) {
      s.abort();
      throw e;
    }
    if (!first?.ready) {
      s.abort();
      throw new Internal("the watch ended before it was in place");
    }
    return new Watch(s, first);
  }

  // -- many files ---------------------------------------------------------------

  /**
   * Writes many files in one call: an object path -> data, or a list of
   * [path, data], [path, data, mode] or {path, data, mode}. A file that fails
   * does not stop the others: check each result (or .ok / .failed).
   */
  async upload(files: Record<string, ByteSource> | UploadItem[], o: UserOpts & { parents?: boolean } = {}): Promise<UploadResult> {
    const items: { path: string; data: ByteSource; mode?: number }[] = Array.isArray(files)
      ? files.map((it) => (Array.isArray(it) ? { path: it[0], data: it[1], mode: it[2] } : it))
      : Object.entries(files).map(([path, data]) => ({ path, data }));
    const sandboxId = this.sb.id;
    async function* requests(): AsyncGenerator<UploadFilesRequest> {
      let first = true;
      for (const f of items) {
        const it = chunks(f.data);
        const head = await it.next();
        yield create(UploadFilesRequestSchema, {
          ...(first ? { sandboxId, user: o.user ?? "", parents: o.parents ?? false } : {}),
          file: create(UploadFileSchema, { path: f.path, mode: f.mode }),
          data: head.done ? new Uint8Array(0) : head.value,
        });
        first = false;
        for await (const c of it) yield create(UploadFilesRequestSchema, { data: c });
      }
      // Nothing to upload: still name the sandbox.
      if (first) yield create(UploadFilesRequestSchema, { sandboxId });
    }
    const c = this.c;
    const r = await c.unary((opts) => c.files.uploadFiles(requests(), opts), o);
    const results = r.results.map(fileResult);
    const failed = results.filter((x) => !x.ok);
    return { results, filesWritten: r.filesWritten, bytesWritten: Number(r.bytesWritten), ok: failed.length === 0, failed };
  }

  /**
   * Reads many files in one call; one DownloadedFile per path, in order,
   * each with its data or its error.
   */
  async download(paths: string[], o: UserOpts & { noFollow?: boolean } = {}): Promise<DownloadedFile[]> {
    const c = this.c;
    const req = create(DownloadFilesRequestSchema, { sandboxId: this.sb.id, paths, user: o.user ?? "", noFollow: o.noFollow ?? false });
    const out: DownloadedFile[] = paths.map((path, index) => ({ index, path, data: new Uint8Array(0), ok: true }));
    const parts: Uint8Array[][] = paths.map(() => []);
    for await (const msg of c.stream((opts) => c.files.downloadFiles(req, opts), o)) {
      const i = msg.index;
      if (i < 0 || i >= out.length) continue;
      const ev = msg.event;
      if (ev.case === "data") parts[i].push(ev.value);
      else if (ev.case === "start") out[i].info = fileInfo(ev.value);
      else if (ev.case === "done" && ev.value.error) {
        out[i].error = fromCode(ev.value.error.code, ev.value.error.message);
        out[i].ok = false;
      }
    }
    out.forEach((f, i) => {
      if (f.ok) f.data = concat(parts[i]);
    });
    return out;
  }
}
