//go:build linux

package main

// Scenario 11: pause and resume latency of an idle running sandbox, from a
// Go client (boxd's PauseSandbox/UnpauseSandbox next to the Docker Engine
// API's /pause and /unpause) and as whole CLI processes (boxctl
// pause/unpause next to docker pause/unpause). Each sample is one call;
// the opposite call runs untimed after it, so every pause starts running
// and every resume starts paused.

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func (b boxdAPI) pause(ctx context.Context, id string) error {
	_, err := b.c.PauseSandbox(ctx, connect.NewRequest(&boxdv1.PauseSandboxRequest{Id: id}))
	return err
}

func (b boxdAPI) unpause(ctx context.Context, id string) error {
	_, err := b.c.UnpauseSandbox(ctx, connect.NewRequest(&boxdv1.UnpauseSandboxRequest{Id: id}))
	return err
}

func (d *dockerAPI) pause(ctx context.Context, id string) error {
	return d.do(ctx, http.MethodPost, "/containers/"+id+"/pause", nil, nil)
}

func (d *dockerAPI) unpause(ctx context.Context, id string) error {
	return d.do(ctx, http.MethodPost, "/containers/"+id+"/unpause", nil, nil)
}

// pauser is a system that pauses and resumes one sandbox.
type pauser struct {
	name           string
	pause, unpause func(ctx context.Context) error
}

func scenarioPause(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
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

	api := []pauser{
		{"boxd API", func(c context.Context) error { return e.boxd.pause(c, sb) }, func(c context.Context) error { return e.boxd.unpause(c, sb) }},
		{"Docker Engine API", func(c context.Context) error { return e.docker.pause(c, dk) }, func(c context.Context) error { return e.docker.unpause(c, dk) }},
	}
	cli := []pauser{
		{"boxctl", func(c context.Context) error { return run(e.boxctlCmd(c, "pause", sb)) }, func(c context.Context) error { return run(e.boxctlCmd(c, "unpause", sb)) }},
		{"docker", func(c context.Context) error { return run(e.dockerCmd(c, "pause", dk)) }, func(c context.Context) error { return run(e.dockerCmd(c, "unpause", dk)) }},
	}
	var out []*latency
	for _, set := range []struct {
		what string
		ps   []pauser
		warm int
		n    int
	}{{"from a running Go client", api, cfg.warm * 3, cfg.apiN}, {"whole CLI process", cli, cfg.warm, cfg.n}} {
		var pauses, resumes []peer
		for _, p := range set.ps {
			p := p
			pauses = append(pauses, peer{name: p.name + " pause",
				run:   func(c context.Context, _ int) error { return p.pause(c) },
				after: func(c context.Context, _ int) error { return p.unpause(c) }})
			resumes = append(resumes, peer{name: p.name + " unpause",
				run:   func(c context.Context, _ int) error { return p.unpause(c) },
				after: func(c context.Context, _ int) error { return p.pause(c) }})
		}
		out = append(out, measure(ctx, "pause an idle sandbox, "+set.what, set.warm, set.n, pauses))
		for _, p := range set.ps {
			if err := p.pause(ctx); err != nil {
				return out, fmt.Errorf("%s pause: %w", p.name, err)
			}
		}
		out = append(out, measure(ctx, "resume a paused sandbox, "+set.what, set.warm, set.n, resumes))
		for _, p := range set.ps {
			if err := p.unpause(ctx); err != nil {
				return out, fmt.Errorf("%s unpause: %w", p.name, err)
			}
		}
	}
	for _, l := range out[:2] {
		for _, name := range []string{"boxd API pause", "boxd API unpause"} {
			if s := l.samples[name]; len(s) > 0 {
				logf("%s: %s median %s (target: at most 20 ms)", l.scenario, name, ms(quantile(s, 0.5)))
			}
		}
	}
	return out, ctx.Err()
}
