//go:build linux

package main

// Scenario 1: the round trip of `true` in a sandbox that is already
// running, first as a whole CLI process (what a shell script pays), then
// from a Go program that keeps its client (what an agent framework pays).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
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
	bare, err := startBareConnect(ctx, e.dir)
	if err != nil {
		return nil, err
	}
	defer bare.stop()
	// With BENCH_AB, the base build's exec runs in the same rounds.
	ab, abSb, abDone, err := startABSandbox(ctx, e)
	if err != nil {
		return nil, err
	}
	defer abDone()
	floor := execFloor(ctx, e.sock, e.boxd, sb, bare, ab, abSb, cfg.warm*3, cfg.apiN)
	return []*latency{cli, cliRow, api, floor}, ctx.Err()
}

// execFloor splits boxd's API exec of `true`, back to back from one Go
// client, into the floor and boxd's part: for every call, the process's
// own life as the init in the sandbox measured it (fork, exec and exit to
// its reaping, ExecResult.process_usec) and the round trip minus that. The
// rows are medians of each; the difference is per call, so the machine's
// drift between calls cancels (target: at most 0.5 ms). More rows say
// where boxd's part goes: the init's own work around the process (its
// span from request to reaping, minus the process); a call that does
// nothing on the same client (the health check, same transport and
// protocol) made right after each exec; the same call to a bare ConnectRPC
// server with no boxd code (bareconnect.go), which is the transport's own
// floor; and, per call, boxd's part minus that floor. Then the barest exec
// that crosses the same two hops (bareconnect.go: that server hands the
// command to a spawner process of its own over a kept connection), its
// round trip minus its process, which no daemon that runs commands in a
// separate process can go below on this machine, and boxd's part minus
// that, per call: what boxd's own code adds. With BENCH_AB the base
// build's exec takes turns with this one's, and its part is a row.
func execFloor(ctx context.Context, sock string, b boxdAPI, id string, bare *bareConnect, ab *abBoxd, abID string, warm, n int) *latency {
	const (
		rt      = "boxd exec round trip"
		proc    = "the process itself (init: fork to reaping)"
		added   = "boxd's part (round trip minus the process, per call)"
		inInit  = "of boxd's part: the init around the process"
		noop    = "of boxd's part: an API call that does nothing (health check, same client)"
		bareRow = "the same call to a bare ConnectRPC server (no boxd code): the transport's floor"
		beyond  = "boxd's part beyond the transport's floor (per call)"
		twoHop  = "the barest exec over the same two hops (bare server, kept connection to a spawner; no boxd code): round trip minus the process"
		own     = "boxd's own code: boxd's part minus the barest exec's (per call)"
		base    = "boxd's part (base)"
		baseOwn = "boxd's own code (base): its part minus the barest exec's (per call)"
	)
	peers := []string{rt, proc, added, inInit, noop, bareRow, beyond, twoHop, own}
	if ab != nil {
		peers = append(peers, base, baseOwn)
	}
	l := &latency{scenario: "exec `true` from a Go client, back to back: the floor and boxd's part (target: boxd's part at most 0.5 ms)",
		peers: peers, samples: map[string][]time.Duration{}, errors: map[string]int{}, firstErr: map[string]string{}}
	logf("%s: %d warm-up + %d calls", l.scenario, warm, n)
	health := grpchealth.NewClient(&http.Client{Transport: apiwire.Transport(sock)}, "http://boxd")
	req := &boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}
	fail := func(row string, err error) {
		l.errors[row]++
		if l.firstErr[row] == "" {
			l.firstErr[row] = err.Error()
		}
	}
	// execPart is one exec's round trip and its process's life.
	execPart := func(c boxdAPI, id string) (d, p time.Duration, res *boxdv1.ExecResult, err error) {
		start := time.Now()
		r, err := c.c.Exec(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: req.Args}))
		d = time.Since(start)
		if err == nil && r.Msg.Result.GetExitCode() != 0 {
			err = fmt.Errorf("exit %d", r.Msg.Result.GetExitCode())
		}
		if err != nil {
			return 0, 0, nil, err
		}
		return d, time.Duration(r.Msg.Result.GetProcessUsec()) * time.Microsecond, r.Msg.Result, nil
	}
	timed := func(f func() error) (time.Duration, error) {
		start := time.Now()
		err := f()
		return time.Since(start), err
	}
	for i := -warm; i < n && ctx.Err() == nil; i++ {
		// The base build goes first on odd calls, so neither always
		// follows the same call.
		var bd, bp time.Duration
		var berr error
		if ab != nil && i%2 != 0 {
			bd, bp, _, berr = execPart(ab.api, abID)
		}
		d, p, res, err := execPart(b, id)
		h, herr := timed(func() error { _, err := health.Check(ctx, &grpchealth.CheckRequest{}); return err })
		f, ferr := timed(func() error { _, err := bare.health.Check(ctx, &grpchealth.CheckRequest{}); return err })
		td, tp, _, terr := execPart(bare.exec, id)
		if ab != nil && i%2 == 0 {
			bd, bp, _, berr = execPart(ab.api, abID)
		}
		if i < 0 {
			continue
		}
		if ab != nil {
			if berr != nil {
				fail(base, berr)
			} else {
				l.samples[base] = append(l.samples[base], bd-bp)
			}
		}
		if ab != nil && berr == nil && terr == nil {
			l.samples[baseOwn] = append(l.samples[baseOwn], (bd-bp)-(td-tp))
		}
		if err != nil || herr != nil || ferr != nil || terr != nil {
			fail(rt, errors.Join(err, herr, ferr, terr))
			continue
		}
		began, _ := time.Parse(time.RFC3339Nano, res.GetStartedAt())
		ended, _ := time.Parse(time.RFC3339Nano, res.GetEndedAt())
		l.samples[rt] = append(l.samples[rt], d)
		l.samples[proc] = append(l.samples[proc], p)
		l.samples[added] = append(l.samples[added], d-p)
		l.samples[inInit] = append(l.samples[inInit], ended.Sub(began)-p)
		l.samples[noop] = append(l.samples[noop], h)
		l.samples[bareRow] = append(l.samples[bareRow], f)
		l.samples[beyond] = append(l.samples[beyond], d-p-f)
		l.samples[twoHop] = append(l.samples[twoHop], td-tp)
		l.samples[own] = append(l.samples[own], (d-p)-(td-tp))
	}
	logf("%s: round trip %s, process %s, boxd's part %s (init %s, a call that does nothing %s; to a bare ConnectRPC server %s; beyond that floor %s; the barest exec's part %s; boxd's own code %s)", l.scenario,
		ms(quantile(l.samples[rt], 0.5)), ms(quantile(l.samples[proc], 0.5)), ms(quantile(l.samples[added], 0.5)),
		ms(quantile(l.samples[inInit], 0.5)), ms(quantile(l.samples[noop], 0.5)), ms(quantile(l.samples[bareRow], 0.5)),
		ms(quantile(l.samples[beyond], 0.5)), ms(quantile(l.samples[twoHop], 0.5)), ms(quantile(l.samples[own], 0.5)))
	if ab != nil {
		logf("%s: base build's part %s, its own code %s", l.scenario, ms(quantile(l.samples[base], 0.5)), ms(quantile(l.samples[baseOwn], 0.5)))
	}
	return l
}

func apiExecPeer(api sandboxAPI, id string) peer {
	return peer{name: api.name() + " exec", run: func(ctx context.Context, _ int) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := execOK(ctx, api, id, "true")
		return err
	}}
}
