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
	rpcclient "github.com/boxd-dev/boxd/rpc/client"
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
	floor := execFloor(ctx, e.sock, e.boxd, sb, cfg.warm*3, cfg.apiN)
	return []*latency{cli, cliRow, api, floor}, ctx.Err()
}

// execFloor splits boxd's API exec of `true`, back to back from one Go
// client, into the floor and boxd's part: for every call, the process's
// own life as the init in the sandbox measured it (fork, exec and exit to
// its reaping, ExecResult.process_usec) and the round trip minus that. The
// rows are medians of each; the difference is per call, so the machine's
// drift between calls cancels (target: at most 0.5 ms). Two more rows say
// where boxd's part goes: the init's own work around the process (its
// span from request to reaping, minus the process), and a call that does
// nothing, the gRPC health check on a client of the same transport, made
// right after each exec: what HTTP/2 and Connect cost any call.
func execFloor(ctx context.Context, sock string, b boxdAPI, id string, warm, n int) *latency {
	const (
		rt     = "boxd exec round trip"
		proc   = "the process itself (init: fork to reaping)"
		added  = "boxd's part (round trip minus the process, per call)"
		inInit = "of boxd's part: the init around the process"
		noop   = "of boxd's part: an API call that does nothing (health check)"
	)
	l := &latency{scenario: "exec `true` from a Go client, back to back: the floor and boxd's part (target: boxd's part at most 0.5 ms)",
		peers: []string{rt, proc, added, inInit, noop}, samples: map[string][]time.Duration{}, errors: map[string]int{}, firstErr: map[string]string{}}
	logf("%s: %d warm-up + %d calls", l.scenario, warm, n)
	health := grpchealth.NewClient(&http.Client{Transport: rpcclient.Transport(sock)}, "http://boxd", connect.WithGRPC())
	req := &boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}
	fail := func(err error) {
		l.errors[rt]++
		if l.firstErr[rt] == "" {
			l.firstErr[rt] = err.Error()
		}
	}
	for i := -warm; i < n && ctx.Err() == nil; i++ {
		start := time.Now()
		r, err := b.c.Exec(ctx, connect.NewRequest(req))
		d := time.Since(start)
		if err == nil && r.Msg.Result.GetExitCode() != 0 {
			err = fmt.Errorf("exit %d", r.Msg.Result.GetExitCode())
		}
		hstart := time.Now()
		_, herr := health.Check(ctx, &grpchealth.CheckRequest{})
		h := time.Since(hstart)
		if i < 0 {
			continue
		}
		if err != nil || herr != nil {
			fail(errors.Join(err, herr))
			continue
		}
		res := r.Msg.Result
		p := time.Duration(res.GetProcessUsec()) * time.Microsecond
		began, _ := time.Parse(time.RFC3339Nano, res.GetStartedAt())
		ended, _ := time.Parse(time.RFC3339Nano, res.GetEndedAt())
		l.samples[rt] = append(l.samples[rt], d)
		l.samples[proc] = append(l.samples[proc], p)
		l.samples[added] = append(l.samples[added], d-p)
		l.samples[inInit] = append(l.samples[inInit], ended.Sub(began)-p)
		l.samples[noop] = append(l.samples[noop], h)
	}
	logf("%s: round trip %s, process %s, boxd's part %s (init %s, a call that does nothing %s)", l.scenario,
		ms(quantile(l.samples[rt], 0.5)), ms(quantile(l.samples[proc], 0.5)), ms(quantile(l.samples[added], 0.5)),
		ms(quantile(l.samples[inInit], 0.5)), ms(quantile(l.samples[noop], 0.5)))
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
