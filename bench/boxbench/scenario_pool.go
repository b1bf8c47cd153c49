//go:build linux

package main

// Scenario 15: the warm pool. Time to interactive (create + first
// command) of a create served by a pool member next to a cold create of
// the same request, one at a time; then a burst of creates with a pool of
// the burst's size, ready before it starts. boxd runs without a pool
// (env.go); this scenario sizes it through the API and empties it again
// before the cleanliness check.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// setPool sets the default image's pool to n and waits until exactly n
// members are ready and none is starting.
func (e *env) setPool(ctx context.Context, n int) error { return setPoolAt(ctx, e.sock, n) }

func (e *env) waitPool(ctx context.Context, n int, d time.Duration) error {
	return waitPoolAt(ctx, e.sock, n, d)
}

// setPoolAt is setPool for the boxd on sock (this build's or, with
// BENCH_AB, the base build's).
func setPoolAt(ctx context.Context, sock string, n int) error {
	pools := rpcclient.NewPool(sock)
	if _, err := pools.SetPoolSize(ctx, connect.NewRequest(&boxdv1.SetPoolSizeRequest{Size: int32(n)})); err != nil {
		return fmt.Errorf("set pool size %d: %w", n, err)
	}
	return waitPoolAt(ctx, sock, n, 5*time.Minute)
}

func waitPoolAt(ctx context.Context, sock string, n int, d time.Duration) error {
	pools := rpcclient.NewPool(sock)
	deadline := time.Now().Add(d)
	for {
		ls, err := pools.ListPools(ctx, connect.NewRequest(&boxdv1.ListPoolsRequest{}))
		if err != nil {
			return fmt.Errorf("list pools: %w", err)
		}
		ready, starting := 0, 0
		for _, p := range ls.Msg.Pools {
			ready += int(p.Ready)
			starting += int(p.Starting)
		}
		if ready == n && starting == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("pool: %d ready, %d starting after %v, want %d ready", ready, starting, d, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// poolAPI is boxd's API with creates that a pool member serves (pooled)
// or that never take one (cold), for the side-by-side rows.
type poolAPI struct {
	boxdAPI
	cold bool
}

func (p poolAPI) name() string {
	if p.cold {
		return "boxd API, cold create"
	}
	return "boxd API, from the warm pool"
}

func (p poolAPI) create(ctx context.Context) (string, error) {
	r, err := p.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{Labels: map[string]string{"boxbench": "1"}, Cold: p.cold}))
	if err != nil {
		return "", err
	}
	return r.Msg.Sandbox.Id, nil
}

func scenarioPool(ctx context.Context, e *env, cfg *config) (*latency, []*burstResult, error) {
	const size = 2
	if err := e.setPool(ctx, size); err != nil {
		return nil, nil, err
	}
	pooled := ttiPeer(poolAPI{boxdAPI: e.boxd})
	// Every sample from the pool starts with the pool full, so none is a
	// cold create in disguise: the refill is waited for, untimed.
	after := pooled.after
	pooled.after = func(ctx context.Context, i int) error {
		if err := after(ctx, i); err != nil {
			return err
		}
		return e.waitPool(ctx, size, time.Minute)
	}
	seq := measure(ctx, "time to interactive, warm pool next to cold (create + first command)", cfg.warm, cfg.ttiN,
		[]peer{pooled, ttiPeer(poolAPI{boxdAPI: e.boxd, cold: true})})
	if ctx.Err() != nil {
		return seq, nil, ctx.Err()
	}
	// With BENCH_AB, the base build's boxd serves the same bursts from a
	// pool of its own, in the same rounds (alternating which goes first),
	// so a gain shows under the same load. Only one pool is full at a time.
	ab, err := startAB(ctx, e)
	if err != nil {
		return seq, nil, err
	}
	defer func() {
		if err := ab.stop(); err != nil {
			logf("A/B: stop base boxd: %v", err)
		}
	}()
	type burster struct {
		ns   string // containerd namespace
		sock string
		api  poolAPI
		br   *burstResult
		prof string
	}
	bursters := []burster{{ns: namespace, sock: e.sock, api: poolAPI{boxdAPI: e.boxd}, prof: "burst",
		br: &burstResult{peer: fmt.Sprintf("boxd API, from a warm pool of %d", cfg.burst), n: cfg.burst}}}
	if ab != nil {
		bursters = append(bursters, burster{ns: abNamespace, sock: ab.sock, api: poolAPI{boxdAPI: ab.api},
			br: &burstResult{peer: fmt.Sprintf("boxd API, from a warm pool of %d (base)", cfg.burst), n: cfg.burst}})
	}
	var errs []error
	for round := 0; round < cfg.burstRounds && ctx.Err() == nil; round++ {
		for k := range bursters {
			b := bursters[(k+round)%len(bursters)]
			logf("pool: filling a pool of %d for the burst (%s, round %d of %d)", cfg.burst, b.br.peer, round+1, cfg.burstRounds)
			t0 := time.Now()
			if err := setPoolAt(ctx, b.sock, cfg.burst); err != nil {
				return seq, nil, err
			}
			logf("pool: %d members ready after %v; load average %s", cfg.burst, time.Since(t0).Round(time.Millisecond), loadAvg())
			burst := func() error { return burstOnce(ctx, b.api, cfg.burst, b.br) }
			if b.prof != "" && round == 0 {
				err = e.profiled(ctx, b.prof, 2*time.Second, burst)
			} else {
				err = burst()
			}
			if perr := setPoolAt(context.WithoutCancel(ctx), b.sock, 0); err == nil {
				err = perr
			}
			// The pool's count drops before its members are destroyed:
			// the next pool fills, and the base boxd stops, only once
			// they are gone.
			if perr := e.waitNoMembers(context.WithoutCancel(ctx), b.ns, 2*time.Minute); err == nil {
				err = perr
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	// This build's row first: the report's ratios are against the first.
	out := make([]*burstResult, len(bursters))
	for i, b := range bursters {
		out[i] = b.br
	}
	return seq, out, errors.Join(append(errs, ctx.Err())...)
}

// loadAvg is the host's 1, 5 and 15 minute load averages, for the log
// next to each burst: a burst's figures mean little without it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// waitNoMembers waits until namespace ns holds no warm-pool member.
func (e *env) waitNoMembers(ctx context.Context, ns string, d time.Duration) error {
	ctx = namespaces.WithNamespace(ctx, ns)
	deadline := time.Now().Add(d)
	for {
		ctrs, err := e.cc.Containers(ctx, `labels."boxd.io/pool"`)
		if err != nil {
			return fmt.Errorf("list pool members in %s: %w", ns, err)
		}
		if len(ctrs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d pool members left in %s after %v", len(ctrs), ns, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
