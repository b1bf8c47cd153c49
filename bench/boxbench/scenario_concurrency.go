//go:build linux

package main

// Scenario 5: many sandboxes busy at once. At each level L, L clients each
// drive their own sandbox, running `true` back to back through the API, a
// fixed number of times (a count, not a duration, so that a slow peer
// cannot stretch the scenario without bound, and every level gives every
// sandbox the same work). It shows where each daemon saturates
// (throughput) and what a single caller then waits (p50, p99).

import (
	"context"
	"sort"
	"sync"
	"time"
)

type concResult struct {
	level    int
	peer     string
	execs    int
	errors   int
	wall     time.Duration
	lat      []time.Duration
	firstErr string
}

func (r *concResult) throughput() float64 {
	if r.wall == 0 {
		return 0
	}
	return float64(len(r.lat)) / r.wall.Seconds()
}

// hammer runs per execs in each of the given sandboxes, one client
// goroutine per sandbox, and adds to r.
func hammer(ctx context.Context, api sandboxAPI, ids []string, per int, r *concResult) {
	lat := make([][]time.Duration, len(ids))
	errs := make([]int, len(ids))
	firstErr := make([]error, len(ids))
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for k, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for j := 0; j < per && ctx.Err() == nil; j++ {
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				t0 := time.Now()
				_, err := execOK(cctx, api, id, "true")
				d := time.Since(t0)
				cancel()
				if err != nil {
					errs[k]++
					if firstErr[k] == nil {
						firstErr[k] = err
					}
					continue
				}
				lat[k] = append(lat[k], d)
			}
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	r.wall += time.Since(start)
	for k := range ids {
		r.execs += per
		r.errors += errs[k]
		r.lat = append(r.lat, lat[k]...)
		if firstErr[k] != nil && r.firstErr == "" {
			r.firstErr = firstErr[k].Error()
			logf("concurrency %d: %s: %v", r.level, api.name(), firstErr[k])
		}
	}
}

// scenarioConcurrency creates the sandboxes it needs beyond given (boxd's
// and docker's that the density scenario left running), and removes all of
// them at the end.
func scenarioConcurrency(ctx context.Context, e *env, cfg *config, given [][]string) ([]*concResult, error) {
	apis := []sandboxAPI{e.boxd, e.docker}
	top := 0
	for _, l := range cfg.levels {
		top = max(top, l)
	}
	fleets := make([][]string, len(apis))
	copy(fleets, given)
	defer func() {
		for k, api := range apis {
			if err := removeMany(context.WithoutCancel(ctx), api, fleets[k], 8); err != nil {
				logf("concurrency: %v", err)
			}
		}
	}()
	for k, api := range apis {
		if n := top - len(fleets[k]); n > 0 {
			logf("concurrency: creating %d sandboxes with %s", n, api.name())
			ids, err := createMany(ctx, api, n, 4)
			if err != nil {
				return nil, err
			}
			fleets[k] = append(fleets[k], ids...)
		}
	}
	// Each level runs each sandbox execsPer times, and at least levelExecs
	// times in all, so small levels still give enough samples for a p99.
	// Two rounds per level, each running half of them, with the order of
	// the peers swapped between them.
	const rounds = 2
	levels := append([]int(nil), cfg.levels...)
	sort.Ints(levels)
	warmed := 0
	var out []*concResult
	for _, level := range levels {
		per := max(cfg.execsPer, (cfg.levelExecs+level-1)/level)
		perRound := (per + rounds - 1) / rounds
		rs := make([]*concResult, len(apis))
		for k, api := range apis {
			rs[k] = &concResult{level: level, peer: api.name()}
			// Warm-up: one untimed exec in each sandbox not used yet.
			if level > warmed {
				hammer(ctx, api, fleets[k][warmed:level], 1, &concResult{level: level})
			}
		}
		warmed = max(warmed, level)
		for round := 0; round < rounds && ctx.Err() == nil; round++ {
			for j := range apis {
				k := (j + round) % len(apis)
				hammer(ctx, apis[k], fleets[k][:level], perRound, rs[k])
			}
		}
		for _, r := range rs {
			logf("concurrency %3d: %-18s %7.1f execs/s, p50 %s, p99 %s, %d errors", level, r.peer, r.throughput(),
				ms(quantile(r.lat, 0.5)), ms(quantile(r.lat, 0.99)), r.errors)
		}
		out = append(out, rs...)
		if ctx.Err() != nil {
			break
		}
	}
	return out, ctx.Err()
}
