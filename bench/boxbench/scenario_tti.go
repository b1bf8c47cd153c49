//go:build linux

package main

// Scenario 2: time to interactive, from "I want a sandbox" to the output
// of its first command, through each system's API: boxd's CreateSandbox +
// Exec, Docker's create + start + exec. Sequentially (one at a time), and as
// a burst of N at once, which is what a fleet of agents starting together
// does to the host.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ttiFirst is the first command; its output proves the sandbox answers.
var ttiFirst = []string{"echo", "ready"}

func createAndAsk(ctx context.Context, api sandboxAPI) (string, error) {
	id, err := api.create(ctx)
	if err != nil {
		return "", err
	}
	out, err := execOK(ctx, api, id, ttiFirst...)
	if err == nil && strings.TrimSpace(string(out)) != "ready" {
		err = fmt.Errorf("first command printed %q", out)
	}
	return id, err
}

func ttiPeer(api sandboxAPI) peer {
	var id string
	return peer{
		name: api.name(),
		run: func(ctx context.Context, _ int) error {
			var err error
			id, err = createAndAsk(ctx, api)
			return err
		},
		after: func(ctx context.Context, _ int) error {
			if id == "" {
				return nil
			}
			err := api.remove(ctx, id)
			id = ""
			return err
		},
	}
}

// burstResult is one peer's bursts: each sandbox's time from the common
// start to its first output, and each burst's wall time.
type burstResult struct {
	peer     string
	n        int
	samples  []time.Duration
	walls    []time.Duration
	errors   int
	firstErr string
}

// burstOnce starts n create-and-ask sequences at the same instant and
// removes the sandboxes afterwards (untimed).
func burstOnce(ctx context.Context, api sandboxAPI, n int, r *burstResult) error {
	ids := make([]string, n)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			t0 := time.Now()
			bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			ids[i], errs[i] = createAndAsk(bctx, api)
			lat[i] = time.Since(t0)
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	wall := time.Since(start)
	r.walls = append(r.walls, wall)
	var ok []time.Duration
	for i := range n {
		if errs[i] == nil {
			ok = append(ok, lat[i])
		}
	}
	name := r.peer
	if name == "" {
		name = api.name()
	}
	logf("burst of %d: %s: median %v, all ready %v, %d errors", n, name, quantile(ok, 0.5).Round(time.Millisecond), wall.Round(time.Millisecond), n-len(ok))
	for i := range n {
		if errs[i] != nil {
			r.errors++
			if r.firstErr == "" {
				r.firstErr = errs[i].Error()
				logf("burst: %s: %v", api.name(), errs[i])
			}
			continue
		}
		r.samples = append(r.samples, lat[i])
	}
	return removeMany(context.WithoutCancel(ctx), api, ids, 8)
}

func scenarioTTI(ctx context.Context, e *env, cfg *config) ([]*latency, []*burstResult, error) {
	apis := []sandboxAPI{e.boxd, e.docker}
	// boxd's default disk cap (10g) next to none, in the same rounds.
	nocap, err := startNoCap(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	lats := []*latency{
		measure(ctx, "create alone, boxd's default disk cap next to none", cfg.warm, cfg.ttiN,
			[]peer{createPeer(e.boxd), createPeer(nocap.api)}),
		measure(ctx, "time to interactive, sequential (create + first command)", cfg.warm, cfg.ttiN,
			[]peer{ttiPeer(e.boxd), ttiPeer(nocap.api), ttiPeer(e.docker)}),
	}
	if err := nocap.stop(); err != nil {
		logf("stop boxd --default-disk 0: %v", err)
	}
	if ctx.Err() != nil {
		return lats, nil, ctx.Err()
	}
	seq := lats
	results := make([]*burstResult, len(apis))
	for k, api := range apis {
		results[k] = &burstResult{peer: api.name(), n: cfg.burst}
	}
	// A failed removal is reported, but the other peer's burst still runs.
	var errs []error
	// A small untimed burst first, so that neither peer pays for first use
	// of many connections or goroutines.
	for _, api := range apis {
		if err := burstOnce(ctx, api, min(cfg.burst, 5), &burstResult{}); err != nil {
			errs = append(errs, err)
		}
	}
	for round := 0; round < cfg.burstRounds && ctx.Err() == nil; round++ {
		for k := range apis {
			i := (k + round) % len(apis)
			logf("burst of %d: %s (round %d of %d)", cfg.burst, apis[i].name(), round+1, cfg.burstRounds)
			if err := burstOnce(ctx, apis[i], cfg.burst, results[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return seq, results, errors.Join(append(errs, ctx.Err())...)
}
