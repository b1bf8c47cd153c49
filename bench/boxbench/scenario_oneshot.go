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

// boxd runs here with its default warm pool (2 members of the default
// image; env.go starts it without one, so the scenario sizes it), and
// `boxctl run` returns once the sandbox is deleted, its teardown going on
// in boxd. The A/B row is the same binaries doing what main did: a cold
// create, and waiting for the whole teardown.
func scenarioOneshot(ctx context.Context, e *env, cfg *config) (_ *latency, err error) {
	if err := e.setPool(ctx, 2); err != nil {
		return nil, err
	}
	defer func() {
		if perr := e.setPool(context.WithoutCancel(ctx), 0); err == nil {
			err = perr
		}
	}()
	r := measure(ctx, "one-shot run of `true` (create, run, delete)", cfg.warm, cfg.oneshotN, []peer{
		{name: "boxctl run", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "run", "--", "true"))
		}},
		{name: "boxctl run --cold --wait-delete (as on main)", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "run", "--cold", "--wait-delete", "--", "true"))
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
