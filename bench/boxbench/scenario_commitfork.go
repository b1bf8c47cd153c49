//go:build linux

package main

// Scenario 10: fork and commit of a sandbox that has 100 MiB written (-big-mib),
// next to `docker commit` of a container with the same file, in the same
// rounds. boxd fork: ForkSandbox with one fork, until the fork's init
// answers (a ready sandbox); boxd commit: CommitSandbox until the image is
// stored, unpacked and named; docker commit: the Engine API's POST /commit
// (what `docker commit` sends; it pauses the container, as boxd freezes
// the sandbox). Each run's fork or image is removed untimed after it.
// With BENCH_AB (ab.go), the base build's boxd forks and commits a
// sandbox of its own as peers "(base)" in the same rounds.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func scenarioCommitFork(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	write := []string{"dd", "if=/dev/urandom", "of=/workspace/big", "bs=1M", "count=" + strconv.Itoa(cfg.bigMiB)}
	sb, err := e.boxd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)
	if _, err := execOK(ctx, e.boxd, sb, write...); err != nil {
		return nil, fmt.Errorf("boxd: write %d MiB: %w", cfg.bigMiB, err)
	}
	dc, err := e.docker.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker create: %w", err)
	}
	defer e.docker.remove(context.WithoutCancel(ctx), dc)
	if _, err := execOK(ctx, e.docker, dc, write...); err != nil {
		return nil, fmt.Errorf("docker: write %d MiB: %w", cfg.bigMiB, err)
	}

	// With BENCH_AB, the base build's boxd forks and commits a sandbox of
	// its own in the same rounds.
	ab, abSb, abDone, err := startABSandbox(ctx, e)
	if err != nil {
		return nil, err
	}
	defer abDone()
	if ab != nil {
		if _, err := execOK(ctx, ab.api, abSb, write...); err != nil {
			return nil, fmt.Errorf("base boxd: write %d MiB: %w", cfg.bigMiB, err)
		}
	}

	const boxdRef, dockerRepo = "bench/committed:latest", "bench/dcommitted"
	forkPeer := func(name string, api boxdAPI, src string) peer {
		var fork string
		return peer{name: name, run: func(ctx context.Context, _ int) error {
			r, err := api.c.ForkSandbox(ctx, connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: src, Count: 1}))
			if err != nil {
				return err
			}
			fork = r.Msg.Sandboxes[0].Id
			return nil
		}, after: func(ctx context.Context, _ int) error {
			if fork == "" {
				return nil
			}
			// The fork is a copy: its file is the source's size.
			out, err := execOK(ctx, api, fork, "stat", "-c", "%s", "/workspace/big")
			if err == nil && string(out) != strconv.Itoa(cfg.bigMiB<<20)+"\n" {
				err = fmt.Errorf("fork's /workspace/big is %q bytes", out)
			}
			rerr := api.remove(ctx, fork)
			fork = ""
			if err != nil {
				return err
			}
			return rerr
		}}
	}
	commitPeer := func(name string, api boxdAPI, src string) peer {
		return peer{name: name, run: func(ctx context.Context, _ int) error {
			_, err := api.c.CommitSandbox(ctx, connect.NewRequest(&boxdv1.CommitSandboxRequest{SandboxId: src, Ref: boxdRef}))
			return err
		}, after: func(ctx context.Context, _ int) error {
			_, err := api.c.RemoveImage(ctx, connect.NewRequest(&boxdv1.RemoveImageRequest{Name: boxdRef}))
			return err
		}}
	}
	peers := []peer{
		forkPeer("boxd fork (1, ready)", e.boxd, sb),
		commitPeer("boxd commit", e.boxd, sb),
		{name: "docker commit (Engine API)", run: func(ctx context.Context, _ int) error {
			q := url.Values{"container": {dc}, "repo": {dockerRepo}, "tag": {"latest"}, "pause": {"1"}}
			return e.docker.do(ctx, http.MethodPost, "/commit?"+q.Encode(), map[string]any{}, nil)
		}, after: func(ctx context.Context, _ int) error {
			return e.docker.do(ctx, http.MethodDelete, "/images/"+url.PathEscape(dockerRepo+":latest")+"?force=1", nil, nil)
		}},
	}
	if ab != nil {
		peers = append(peers, forkPeer("boxd fork (1, ready) (base)", ab.api, abSb), commitPeer("boxd commit (base)", ab.api, abSb))
	}
	title := fmt.Sprintf("fork and commit of a sandbox with %d MiB written", cfg.bigMiB)
	all := measure(ctx, title, cfg.warm, cfg.commitN, peers)
	// Two rows, each with docker commit as the peer of one boxd call.
	split := func(scenario, boxdPeer string) *latency {
		ps := []string{boxdPeer, peers[2].name}
		if ab != nil {
			ps = append(ps, boxdPeer+" (base)")
		}
		l := &latency{scenario: scenario, peers: ps,
			samples: map[string][]time.Duration{}, errors: map[string]int{}, firstErr: map[string]string{}}
		for _, p := range l.peers {
			l.samples[p], l.errors[p], l.firstErr[p] = all.samples[p], all.errors[p], all.firstErr[p]
		}
		return l
	}
	fl := split(fmt.Sprintf("fork of a sandbox with %d MiB written (target: at most 1 s)", cfg.bigMiB), peers[0].name)
	cl := split(fmt.Sprintf("commit of a sandbox with %d MiB written (target: at most 2 s)", cfg.bigMiB), peers[1].name)
	for _, p := range peers {
		logf("%s: %s median %s", title, p.name, ms(quantile(all.samples[p.name], 0.5)))
	}
	return []*latency{fl, cl}, ctx.Err()
}
