// A sandbox manager service: a TypeScript SandboxManager, as one would
// write over dockerode, on boxd.
//
// Such a manager keeps a map of sandboxes, creates each from an image with a memory
// limit, a CPU limit, env and a working directory, runs commands in them
// (demultiplexing Docker's 8-byte stream headers by hand, trimming the
// output), reports stats, removes each after a timeout with a cleanup
// scheduler, and emits lifecycle events. On boxd the same class is a few
// lines over @boxd/sdk: boxd keeps the sandboxes (so list() survives this
// process), stdout and stderr arrive apart and byte-exact, the TTL removes
// a sandbox even if this process dies, there is no image to pull, and
// pause and resume freeze and thaw every process of the sandbox.
//
// Run: BOXD_SOCKET=/run/boxd/boxd.sock node dist/examples/sandbox_manager.js
// (in your own code, import from "@boxd/sdk").

import { EventEmitter } from "node:events";
import { NotFound, Sandbox, list, type SandboxInfo } from "../src/index.js";

export interface SandboxConfig {
  image?: string;
  memoryLimit?: string;
  cpuLimit?: number;
  /** Milliseconds until the sandbox is removed (boxd's TTL does it). */
  timeout?: number;
  env?: Record<string, string>;
  workDir?: string;
}

export interface ExecuteResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface SandboxStats {
  cpuUsec: number;
  memoryUsage: number;
  pids: number;
}

const LABEL = "sandbox-manager-example";

export class SandboxManager extends EventEmitter {
  /** Checks that boxd answers (a Docker version pings Docker and pulls an image). */
  async initialize(): Promise<void> {
    await list({ labels: { app: LABEL } });
    this.emit("initialized");
  }

  async createSandbox(name: string, config: SandboxConfig = {}): Promise<SandboxInfo> {
    const sb = await Sandbox.create({
      image: config.image,
      name,
      memory: config.memoryLimit ?? "512m",
      cpus: config.cpuLimit ?? 1,
      env: config.env,
      workdir: config.workDir ?? "/workspace",
      ttl: `${config.timeout ?? 300000}ms`,
      labels: { app: LABEL },
    });
    const info = await sb.info();
    this.emit("sandbox:created", info);
    return info;
  }

  async executeInSandbox(sandboxId: string, command: string[]): Promise<ExecuteResult> {
    const r = await (await Sandbox.connect(sandboxId)).exec(command);
    return { stdout: r.stdoutText.trim(), stderr: r.stderrText.trim(), exitCode: r.exitCode };
  }

  async getSandboxStats(sandboxId: string): Promise<SandboxStats> {
    const u = (await (await Sandbox.connect(sandboxId)).info()).usage;
    return { cpuUsec: u?.cpuUsec ?? 0, memoryUsage: u?.memoryBytes ?? 0, pids: u?.pids ?? 0 };
  }

  async pauseSandbox(sandboxId: string): Promise<void> {
    await (await Sandbox.connect(sandboxId)).pause();
    this.emit("sandbox:paused", sandboxId);
  }

  async resumeSandbox(sandboxId: string): Promise<void> {
    await (await Sandbox.connect(sandboxId)).resume();
    this.emit("sandbox:resumed", sandboxId);
  }

  async cleanupSandbox(sandboxId: string): Promise<void> {
    try {
      await (await Sandbox.connect(sandboxId)).delete();
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
    this.emit("sandbox:cleaned", sandboxId);
  }

  async getSandbox(sandboxId: string): Promise<SandboxInfo | undefined> {
    try {
      return await (await Sandbox.connect(sandboxId)).info();
    } catch (e) {
      if (e instanceof NotFound) return undefined;
      throw e;
    }
  }

  listSandboxes(): Promise<SandboxInfo[]> {
    return list({ labels: { app: LABEL } });
  }

  async shutdown(): Promise<void> {
    await Promise.all((await this.listSandboxes()).map((s) => this.cleanupSandbox(s.id)));
    this.emit("shutdown");
  }
}

// The manager's own use, checked: exits non-zero if anything is not as it promises.
async function main(): Promise<void> {
  const m = new SandboxManager();
  const events: string[] = [];
  for (const e of ["initialized", "sandbox:created", "sandbox:paused", "sandbox:resumed", "sandbox:cleaned", "shutdown"]) m.on(e, () => events.push(e));
  await m.initialize();
  const name = `manager-${process.pid}`;
  const info = await m.createSandbox(name, { image: process.env.BOXD_TEST_IMAGE || undefined, memoryLimit: "128m", cpuLimit: 0.5, env: { GREETING: "hello" }, timeout: 60000 });
  const check = (ok: boolean, what: string): void => {
    if (!ok) throw new Error(`sandbox manager on boxd: ${what}`);
  };
  try {
    check(info.memoryBytes === 128 << 20 && info.cpus === 0.5, `limits ${info.memoryBytes} ${info.cpus}`);
    const r = await m.executeInSandbox(info.id, ["sh", "-c", "echo $GREETING; pwd; echo oops >&2; exit 2"]);
    check(r.stdout === "hello\n/workspace" && r.stderr === "oops" && r.exitCode === 2, JSON.stringify(r));
    const stats = await m.getSandboxStats(info.id);
    check(stats.memoryUsage > 0, `stats ${JSON.stringify(stats)}`);
    check((await m.listSandboxes()).some((s) => s.id === info.id), "listed");
    check((await m.getSandbox(name))?.id === info.id, "found by name");
    await m.pauseSandbox(info.id);
    check((await m.getSandbox(info.id))?.state === "paused", "paused");
    await m.resumeSandbox(info.id);
    const again = await m.executeInSandbox(info.id, ["echo", "back"]);
    check(again.stdout === "back" && again.exitCode === 0, `after resume ${JSON.stringify(again)}`);
    console.log(JSON.stringify({ result: r, stats, expiresAt: info.expiresAt }));
  } finally {
    await m.shutdown();
  }
  check((await m.getSandbox(info.id)) === undefined, "removed");
  check(events.join(",") === "initialized,sandbox:created,sandbox:paused,sandbox:resumed,sandbox:cleaned,shutdown", events.join(","));
  console.log("OK");
}

await main();
