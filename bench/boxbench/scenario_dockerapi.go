//go:build linux

package main

// Scenario: boxd's Docker Engine API endpoint (--docker-socket) next to
// the same calls to the private dockerd on the same containerd: docker
// exec and docker run --rm as whole CLI processes (the same docker CLI,
// pointed at either socket), and the Engine API exec from a running Go
// client beside boxd's own API exec. Targets: the endpoint 5x faster than
// dockerd for exec, 1.5x for a one-shot run, and its API exec within 1 ms
// of boxd's own.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// boxdDockerAPI is the bench's Engine API client pointed at boxd.
type boxdDockerAPI struct{ *dockerAPI }

func (boxdDockerAPI) name() string { return "Docker Engine API (boxd's endpoint)" }

// boxdDockerCmd is dockerCmd against boxd's endpoint.
func (e *env) boxdDockerCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.dockerCLI, args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+e.boxdDockerSock(), "DOCKER_CONFIG="+filepath.Join(e.dockerDir, "cli"))
	return cmd
}

func (e *env) boxdDockerSock() string { return filepath.Join(e.dir, "run", "docker.sock") }

func scenarioDockerAPI(ctx context.Context, e *env, cfg *config) ([]*latency, error) {
	bd := boxdDockerAPI{newDockerAPI(e.boxdDockerSock(), image)}
	bid, err := bd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd's Docker endpoint: create: %w", err)
	}
	defer bd.remove(context.WithoutCancel(ctx), bid)
	dk, err := e.docker.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker create: %w", err)
	}
	defer e.docker.remove(context.WithoutCancel(ctx), dk)
	sb, err := e.boxd.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("boxd create: %w", err)
	}
	defer e.boxd.remove(context.WithoutCancel(ctx), sb)

	cli := measure(ctx, "docker exec `true`, whole CLI process: boxd's endpoint vs dockerd (target: 5x faster)", cfg.warm, cfg.n, []peer{
		{name: "docker exec (boxd's endpoint)", run: func(ctx context.Context, _ int) error {
			return run(e.boxdDockerCmd(ctx, "exec", bid, "true"))
		}},
		{name: "docker exec (dockerd)", run: func(ctx context.Context, _ int) error {
			return run(e.dockerCmd(ctx, "exec", dk, "true"))
		}},
	})
	// The same settings on both: no network, 512m without swap, 1 CPU,
	// 256 pids (boxd's defaults).
	runArgs := []string{"run", "--rm", "--network", "none", "--memory", "512m", "--memory-swap", "512m", "--cpus", "1", "--pids-limit", "256", image, "true"}
	oneshot := measure(ctx, "docker run --rm `true`: boxd's endpoint vs dockerd (target: 1.5x faster)", cfg.warm, cfg.oneshotN, []peer{
		{name: "docker run --rm (boxd's endpoint)", run: func(ctx context.Context, _ int) error {
			return run(e.boxdDockerCmd(ctx, runArgs...))
		}},
		{name: "docker run --rm (dockerd)", run: func(ctx context.Context, _ int) error {
			return run(e.dockerCmd(ctx, runArgs...))
		}},
	})
	api := measure(ctx, "exec `true` from a running Go client: Engine API on boxd's endpoint vs boxd's own API (target: within 1 ms)", cfg.warm*3, cfg.apiN, []peer{
		apiExecPeer(bd, bid),
		apiExecPeer(e.boxd, sb),
		apiExecPeer(e.docker, dk),
	})
	return []*latency{cli, oneshot, api}, ctx.Err()
}
