//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// sandboxAPI is what the API-level scenarios (time to interactive,
// concurrency, density) need from each system, so one piece of code drives
// boxd's API and the Docker Engine API alike.
type sandboxAPI interface {
	name() string
	// create returns a running, idle sandbox.
	create(ctx context.Context) (string, error)
	// exec runs a command and returns its stdout and exit code.
	exec(ctx context.Context, id string, args ...string) ([]byte, int, error)
	remove(ctx context.Context, id string) error
}

// boxdAPI drives boxd through internal/rpcclient, as a Go program would.
type boxdAPI struct {
	c boxdv1connect.SandboxServiceClient
	// runtime, if set, is the create's runtime (runc or gvisor), and
	// label the peer's name in the report (scenario gvisor).
	runtime, label string
}

func (b boxdAPI) name() string {
	if b.label != "" {
		return b.label
	}
	return "boxd API"
}

func (b boxdAPI) create(ctx context.Context) (string, error) {
	r, err := b.c.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{Labels: map[string]string{"boxbench": "1"}, Runtime: b.runtime}))
	if err != nil {
		return "", err
	}
	return r.Msg.Sandbox.Id, nil
}

func (b boxdAPI) exec(ctx context.Context, id string, args ...string) ([]byte, int, error) {
	r, err := b.c.Exec(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: args}))
	if err != nil {
		return nil, -1, err
	}
	return r.Msg.Stdout, int(r.Msg.Result.ExitCode), nil
}

func (b boxdAPI) remove(ctx context.Context, id string) error {
	_, err := b.c.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	return err
}

func (b boxdAPI) list(ctx context.Context) ([]string, error) {
	r, err := b.c.ListSandboxes(ctx, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, s := range r.Msg.Sandboxes {
		ids = append(ids, s.Id)
	}
	return ids, nil
}

// execOK runs a command and fails unless it exits 0.
func execOK(ctx context.Context, api sandboxAPI, id string, args ...string) ([]byte, error) {
	out, code, err := api.exec(ctx, id, args...)
	if err == nil && code != 0 {
		err = fmt.Errorf("%v: exit %d", args, code)
	}
	return out, err
}

// createMany creates n sandboxes with at most par creates in flight (boxd
// serializes creates internally; parallel requests still overlap the
// client-side round trips). On error it removes what it made.
func createMany(ctx context.Context, api sandboxAPI, n, par int) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				id, err := api.create(ctx)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				ids[i] = id
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		_ = removeMany(context.WithoutCancel(ctx), api, ids, par)
		return nil, fmt.Errorf("%s: create %d sandboxes: %w", api.name(), n, err)
	}
	return ids, nil
}

// removeMany removes the given sandboxes (empty ids are skipped), par at a
// time. A failed remove is retried a few times, a second apart, as a
// careful client would; every failed attempt is logged and noted for the
// report (a client that does not retry would have leaked there), and what
// still fails is returned.
func removeMany(ctx context.Context, api sandboxAPI, ids []string, par int) error {
	ch := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ch {
				var err error
				for try := 1; try <= 5; try++ {
					if err = api.remove(ctx, id); err == nil || ctx.Err() != nil {
						break
					}
					note(fmt.Sprintf("%s: removing %s failed (attempt %d): %v", api.name(), id, try, err))
					time.Sleep(time.Second)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: remove %s: %w", api.name(), id, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		if id != "" {
			ch <- id
		}
	}
	close(ch)
	wg.Wait()
	return errors.Join(errs...)
}

var (
	notesMu sync.Mutex
	notes   []string
)

// note logs something the report should mention even if the run
// recovered from it.
func note(s string) {
	logf("%s", s)
	notesMu.Lock()
	notes = append(notes, s)
	notesMu.Unlock()
}
