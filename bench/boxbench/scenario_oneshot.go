//go:build linux

package main

// Scenario 3: a one-shot run of `true`: create, run, delete, as one CLI
// call of each tool. The sandbox is gone when the command returns, in all
// three.

import (
	"context"
	"fmt"
	"github.com/boxd-dev/boxd/internal/testenv"
)

func scenarioOneshot(ctx context.Context, e *env, cfg *config) (*latency, error) {
	r := measure(ctx, "one-shot run of `true` (create, run, delete)", cfg.warm, cfg.oneshotN, []peer{
		{name: "boxctl run", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "run", "--", "true"))
		}},
		{name: "docker run --rm", run: func(ctx context.Context, _ int) error {
			// The same settings as boxd's defaults: no network, 512m
			// without swap, 1 CPU, 256 pids.
			return run(e.dockerCmd(ctx, "run", "--rm", "--network", "none", "--memory", "512m", "--memory-swap", "512m",
				"--cpus", "1", "--pids-limit", "256", image, "true"))
		}},
		{name: "ctr run --rm", run: func(ctx context.Context, i int) error {
			return run(e.ctrCmd(ctx, "run", "--runc-binary", testenv.Runc, "--rm", image, fmt.Sprintf("oneshot-%d", i), "true"))
		}},
	})
	return r, ctx.Err()
}
