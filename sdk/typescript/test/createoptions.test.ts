// CreateOptions to CreateSandboxRequest, without a daemon: every option
// (sdk/create-options.json lists them) sets its field, in the forms the
// CLI takes; the egress network's mapping (its e2e needs its own topology).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createRequest, forkRequest } from "../src/sandbox.js";

describe("create options", () => {
  test("each option sets its field", () => {
    const r = createRequest({
      image: "img", memory: "256m", cpus: 1.5, pids: 9, disk: "2g", env: { A: "1" }, workdir: "/w", labels: { k: "v" },
      name: "n", ttl: "1h", publish: [8080, { port: 81, hostPort: 9000, hostIp: "127.0.0.2", protocol: "tcp" }],
      pull: "missing", auth: { username: "u", password: "p", identityToken: "t" }, idleTimeout: "30m", onIdle: "delete",
      user: "sandbox", readOnly: true, tmpfs: ["/cache:8m"], ulimits: ["nofile=512"], hostname: "h", cpuWeight: 300,
      memoryLow: "64m", execTimeout: 90, outputLimit: 1000, replace: true, runtime: "gvisor", cold: true,
      git: "https://example.com/r.git#v1", gitDepth: 1,
    });
    assert.deepEqual([r.git, r.gitDepth], ["https://example.com/r.git#v1", 1]);
    assert.deepEqual(
      [r.image, r.limits?.memory, r.limits?.cpus, r.limits?.pids, r.limits?.disk, r.env, r.workdir, r.labels, r.name, r.ttl],
      ["img", "256m", 1.5, 9n, "2g", ["A=1"], "/w", { k: "v" }, "n", "1h"],
    );
    assert.deepEqual(r.publish.map((p) => [p.port, p.hostPort, p.hostIp, p.protocol]), [[8080, 0, "", ""], [81, 9000, "127.0.0.2", "tcp"]]);
    assert.deepEqual([r.pull, r.registryAuth?.username, r.registryAuth?.password, r.registryAuth?.identityToken], ["missing", "u", "p", "t"]);
    assert.deepEqual([r.idleTimeout, r.onIdle, r.user, r.readOnlyRootfs, r.tmpfs, r.ulimits, r.hostname], ["30m", "delete", "sandbox", true, ["/cache:8m"], ["nofile=512"], "h"]);
    assert.deepEqual([r.cpuWeight, r.memoryLow, r.execTimeout, r.outputLimit, r.replace, r.runtime, r.cold], [300n, "64m", "90000ms", 1000n, true, "gvisor", true]);
    assert.equal(r.network, undefined);
  });

  test("fork options set their fields", () => {
    const r = forkRequest("sb", {
      count: 2, names: ["a", "b"], memory: "128m", cpus: 0.5, pids: 7, env: { A: "1" }, workdir: "/w", labels: { k: "v" },
      ttl: "1h", cloneVolumes: true, shareVolumes: true, withProcesses: true,
    });
    assert.deepEqual(
      [r.sandboxId, r.count, r.names, r.limits?.memory, r.limits?.cpus, r.limits?.pids, r.env, r.workdir, r.labels, r.ttl, r.cloneVolumes, r.shareVolumes, r.withProcesses],
      ["sb", 2, ["a", "b"], "128m", 0.5, 7n, ["A=1"], "/w", { k: "v" }, "1h", true, true, true],
    );
  });

  test("network: allow means egress; network alone sets the mode", () => {
    const net = (o: Parameters<typeof createRequest>[0]) => {
      const n = createRequest(o).network;
      return n ? [n.mode, n.allow] : undefined;
    };
    assert.deepEqual(net({ allow: ["api.example.com:443"] }), ["egress", ["api.example.com:443"]]);
    assert.deepEqual(net({ allow: [] }), ["egress", []]);
    assert.deepEqual(net({ network: "egress" }), ["egress", []]);
    assert.deepEqual(net({ network: "none" }), ["none", []]);
    assert.deepEqual(net({ network: "egress", allow: ["*:443"] }), ["egress", ["*:443"]]);
    assert.equal(net({}), undefined);
  });
});
