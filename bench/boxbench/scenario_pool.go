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
	"fmt"
	"time"

	"connectrpc.com/connect"

	rpcclient "github.com/boxd-dev/boxd/rpc/client"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// setPool sets the default image's pool to n and waits until exactly n
// members are ready and none is starting.
func (e *env) setPool(ctx context.Context, n int) error {
	pools := rpcclient.NewPool(e.sock)
	if _, err := pools.SetPoolSize(ctx, connect.NewRequest(&boxdv1.SetPoolSizeRequest{Size: int32(n)})); err != nil {
		return fmt.Errorf("set pool size %d: %w", n, err)
	}
	return e.waitPool(ctx, n, 5*time.Minute)
}

func (e *env) waitPool(ctx context.Context, n int, d time.Duration) error {
	pools := rpcclient.NewPool(e.sock)
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

func scenarioPool(ctx context.Context, e *env, cfg *config) (*latency, *burstResult, error) {
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
	logf("pool: filling a pool of %d for the burst", cfg.burst)
	t0 := time.Now()
	if err := e.setPool(ctx, cfg.burst); err != nil {
		return seq, nil, err
	}
	logf("pool: %d members ready after %v", cfg.burst, time.Since(t0).Round(time.Millisecond))
	br := &burstResult{peer: fmt.Sprintf("boxd API, from a warm pool of %d", cfg.burst), n: cfg.burst}
	err := burstOnce(ctx, poolAPI{boxdAPI: e.boxd}, cfg.burst, br)
	if perr := e.setPool(context.WithoutCancel(ctx), 0); err == nil {
		err = perr
	}
	return seq, br, err
}
