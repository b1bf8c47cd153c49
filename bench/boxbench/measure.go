//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"
)

// peer is one contender in a latency scenario.
type peer struct {
	name string
	// run is timed, whole.
	run func(ctx context.Context, i int) error
	// after, if set, runs untimed after each run (removing what run made),
	// so every sample starts from the same state.
	after func(ctx context.Context, i int) error
}

// latency holds one scenario's samples per peer. The first peer is boxd's;
// the report gives every other peer's median as a multiple of it.
type latency struct {
	scenario string
	peers    []string
	samples  map[string][]time.Duration
	errors   map[string]int
	firstErr map[string]string
}

// measure runs warm untimed rounds, then n rounds. Every round runs each
// peer once, one after another, and rotates which goes first (A B C, B C A,
// C A B...), so drift on a shared machine, caches and daemon state hit all
// peers alike.
func measure(ctx context.Context, scenario string, warm, n int, peers []peer) *latency {
	return measureStreak(ctx, scenario, warm, n, 1, peers)
}

// measureStreak is measure with each peer's turn made of streak calls in a
// row; only the calls after the first are sampled, so every sample follows
// the same peer's previous call, as in a script or an agent that runs many
// commands back to back, where measure's samples each follow the other
// peers' turns, as after a pause. The i passed to run is unique per call.
func measureStreak(ctx context.Context, scenario string, warm, n, streak int, peers []peer) *latency {
	r := &latency{scenario: scenario, samples: map[string][]time.Duration{}, errors: map[string]int{}, firstErr: map[string]string{}}
	for _, p := range peers {
		r.peers = append(r.peers, p.name)
	}
	streak = max(streak, 1)
	logf("%s: %d warm-up + %d rounds of %d peers, %d calls a turn", scenario, warm, n, len(peers), streak)
	for i := -warm; i < n && ctx.Err() == nil; i++ {
		for k := range peers {
			p := peers[(k+max(i, 0))%len(peers)]
			for j := 0; j < streak && ctx.Err() == nil; j++ {
				seq := (i+warm)*streak + j // unique per call, for names
				start := time.Now()
				err := p.run(ctx, seq)
				d := time.Since(start)
				if p.after != nil {
					if aerr := p.after(ctx, seq); aerr != nil && err == nil {
						err = fmt.Errorf("after: %w", aerr)
					}
				}
				if i < 0 || (streak > 1 && j == 0) {
					continue
				}
				if err != nil {
					r.errors[p.name]++
					if r.firstErr[p.name] == "" {
						r.firstErr[p.name] = err.Error()
						logf("%s: %s: %v", scenario, p.name, err)
					}
					continue
				}
				r.samples[p.name] = append(r.samples[p.name], d)
			}
		}
	}
	return r
}

// quantile returns the q-quantile by the nearest-rank method (q=0.5 is the
// median, 0.95 the p95); 0 for no samples.
func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	k := int(math.Ceil(q*float64(len(c)))) - 1
	return c[min(max(k, 0), len(c)-1)]
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < 10*time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
}

// ratio formats a peer's value as a multiple of boxd's.
func ratio(peer, boxd time.Duration) string {
	if peer == 0 || boxd == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", float64(peer)/float64(boxd))
}
