// The code interpreter: Sandbox.runCode and its results (CodeService).
// Code runs in a long-lived IPython kernel in the sandbox, one per named
// context, so variables and imports persist between calls. The image needs
// python3, python3-ipykernel and python3-jupyter-client (boxd's Debian image
// has them, with matplotlib). See docs/interpreter.md.

import { create } from "@bufbuild/protobuf";
import type { CallOpts, Client } from "./client.js";
import {
  DeleteCodeContextRequestSchema,
  ListCodeContextsRequestSchema,
  RestartCodeContextRequestSchema,
  RunCodeRequestSchema,
  type CodeOutput as CodeOutputPb,
} from "./gen/boxd/v1/interp_pb.js";
import { duration, type Duration } from "./types.js";

const text = new TextDecoder();

/**
 * One MIME bundle: the same content as one or more of text/plain, text/html,
 * image/png (decoded bytes), image/svg+xml, application/json, text/markdown.
 */
export class CodeOutput {
  constructor(readonly data: Record<string, Uint8Array>) {}
  private str(mime: string): string | undefined {
    const b = this.data[mime];
    return b === undefined ? undefined : text.decode(b);
  }
  get text(): string | undefined { return this.str("text/plain"); }
  get html(): string | undefined { return this.str("text/html"); }
  get svg(): string | undefined { return this.str("image/svg+xml"); }
  get markdown(): string | undefined { return this.str("text/markdown"); }
  get png(): Uint8Array | undefined { return this.data["image/png"]; }
  get json(): unknown {
    const s = this.str("application/json");
    return s === undefined ? undefined : JSON.parse(s);
  }
}

/** An exception the code raised. */
export interface CodeError {
  name: string;
  value: string;
  traceback: string[];
}

/** How a run ended. */
export interface CodeResult {
  stdout: string;
  stderr: string;
  /** The last expression's value, if the cell has one. */
  value?: CodeOutput;
  displays: CodeOutput[];
  error?: CodeError;
  truncated: boolean;
  timedOut: boolean;
  /** The cell was interrupted; the context survived unless restarted. */
  interrupted: boolean;
  /** The context's kernel started afresh: its state is gone. */
  restarted: boolean;
  executionCount: number;
  context: string;
  durationMs: number;
}

export interface RunCodeOptions extends CallOpts {
  /** "python" (the default; the only language so far). */
  language?: string;
  /** The context to run in (default "default"). */
  context?: string;
  /** Seconds (or a Go duration) after which the cell is interrupted. */
  timeout?: Duration;
  /** Bytes of output kept (0: the sandbox's default). */
  outputLimit?: number;
  onStdout?: (s: string) => void;
  onStderr?: (s: string) => void;
}

const bundle = (o: CodeOutputPb): CodeOutput => new CodeOutput({ ...o.data });

/** @internal Sandbox.runCode. */
export async function runCode(c: Client, sandboxId: string, code: string, o: RunCodeOptions = {}): Promise<CodeResult> {
  const req = create(RunCodeRequestSchema, {
    sandboxId,
    code,
    language: o.language ?? "python",
    context: o.context ?? "",
    timeout: duration(o.timeout),
    outputLimit: BigInt(o.outputLimit ?? 0),
  });
  const out: string[] = [];
  const err: string[] = [];
  const res: CodeResult = {
    stdout: "", stderr: "", displays: [], truncated: false, timedOut: false, interrupted: false,
    restarted: false, executionCount: 0, context: "", durationMs: 0,
  };
  for await (const msg of c.stream((opts) => c.code.runCode(req, opts), o)) {
    const ev = msg.event;
    if (ev.case === "stdout" || ev.case === "stderr") {
      const s = text.decode(ev.value);
      (ev.case === "stdout" ? out : err).push(s);
      (ev.case === "stdout" ? o.onStdout : o.onStderr)?.(s);
    } else if (ev.case === "result") {
      const r = ev.value;
      res.value = r.value ? bundle(r.value) : undefined;
      res.displays = r.displays.map(bundle);
      res.error = r.error ? { name: r.error.name, value: r.error.value, traceback: [...r.error.traceback] } : undefined;
      Object.assign(res, {
        truncated: r.truncated, timedOut: r.timedOut, interrupted: r.interrupted, restarted: r.restarted,
        executionCount: Number(r.executionCount), context: r.context, durationMs: Number(r.durationMs),
      });
    }
  }
  res.stdout = out.join("");
  res.stderr = err.join("");
  return res;
}

/** @internal */
export async function listCodeContexts(c: Client, sandboxId: string, o?: CallOpts): Promise<string[]> {
  const r = await c.unary((opts) => c.code.listCodeContexts(create(ListCodeContextsRequestSchema, { sandboxId }), opts), o);
  return r.contexts.map((x) => x.name);
}

/** @internal */
export async function restartCodeContext(c: Client, sandboxId: string, context: string, o?: CallOpts): Promise<void> {
  await c.unary((opts) => c.code.restartCodeContext(create(RestartCodeContextRequestSchema, { sandboxId, context }), opts), o);
}

/** @internal */
export async function deleteCodeContext(c: Client, sandboxId: string, context: string, o?: CallOpts): Promise<void> {
  await c.unary((opts) => c.code.deleteCodeContext(create(DeleteCodeContextRequestSchema, { sandboxId, context }), opts), o);
}
