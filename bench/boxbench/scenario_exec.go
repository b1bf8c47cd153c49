//go:build linux

package main

// Scenario 1: the round trip of `true` in a sandbox that is already
// running, first as a whole CLI process (what a shell script pays), then
// from a Go program that keeps its client (what an agent framework pays).

import (
	"context"
	"fmt"
	"github.com/boxd-dev/boxd/internal/testenv"
	"time"
)

func scenarioExec(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	sb, err := e.boxd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)
	dk, err := e.docker.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker create: %w", err)
	}
	defer e.docker.remove(context.WithoutCancel(ctx), dk)
	// ctr's container: no user namespace, no limits, no seccomp
	// changes: ctr's defaults.
	const ctrName = "bench-exec"
	if err := run(e.ctrCmd(ctx, "run", "--runc-binary", testenv.Runc, "-d", image, ctrName, "sleep", "1000000000")); err != nil {
		return nil, err
	}
	defer func() {
		c := context.WithoutCancel(ctx)
		_ = run(e.ctrCmd(c, "task", "delete", "-f", ctrName))
		_ = run(e.ctrCmd(c, "container", "delete", ctrName))
	}()

	cliPeers := []peer{
		{name: "boxctl exec", run: func(ctx context.Context, _ int) error {
			return run(e.boxctlCmd(ctx, "exec", sb, "--", "true"))
		}},
		{name: "docker exec", run: func(ctx context.Context, _ int) error {
			return run(e.dockerCmd(ctx, "exec", dk, "true"))
		}},
		{name: "ctr task exec", run: func(ctx context.Context, i int) error {
			return run(e.ctrCmd(ctx, "task", "exec", "--exec-id", fmt.Sprintf("e%d", i), ctrName, "true"))
		}},
	}
	cli := measure(ctx, "exec `true`, whole CLI process", cfg.warm, cfg.n, cliPeers)
	// The same, each call right after the same peer's previous one: the
	// rounds above give every peer the other peers' turns as a pause, after
	// which every process involved, the kernel's fork included, runs
	// slower on this kind of VM.
	for i := range cliPeers {
		run := cliPeers[i].run
		cliPeers[i].run = func(ctx context.Context, seq int) error { return run(ctx, seq+1_000_000) } // fresh ctr exec ids
	}
	cliRow := measureStreak(ctx, "exec `true`, whole CLI process, back to back", 1, max(cfg.n/3, 2), 10, cliPeers)
	api := measure(ctx, "exec `true` from a running Go client", cfg.warm*3, cfg.apiN, []peer{
		apiExecPeer(e.boxd, sb),
		apiExecPeer(e.docker, dk),
	})
	return []*latency{cli, cliRow, api}, ctx.Err()
}

func apiExecPeer(api sandboxAPI, id string) peer {
	return peer{name: api.name() + " exec", run: func(ctx context.Context, _ int) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := execOK(ctx, api, id, "true")
		return err
	}}
}
