// CreateOptions to CreateSandboxRequest, without a daemon: every option
// (sdk/create-options.json lists them) sets its field, in the forms the
// CLI takes; the egress network's mapping (its e2e needs its own topology).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createRequest } from "../src/sandbox.js";

describe("create options", () => {
  test("each option sets its field", () => {
    const r = createRequest({
      image: "img", memory: "256m", cpus: 1.5, pids: 9, disk: "2g", env: { A: "1" }, workdir: "/w", labels: { k: "v" },
      name: "n", ttl: "1h", publish: [8080, { port: 81, hostPort: 9000, hostIp: "127.0.0.2", protocol: "tcp" }],
      pull: "missing", auth: { username: "u", password: "p", identityToken: "t" }, idleTimeout: "30m", onIdle: "delete",
      user: "sandbox", readOnly: true, tmpfs: ["/cache:8m"], ulimits: ["nofile=512"], hostname: "h", cpuWeight: 300,
      memoryLow: "64m", execTimeout: 90, outputLimit: 1000, replace: true, runtime: "gvisor", cold: true,
    });
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
