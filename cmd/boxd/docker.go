//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/dockerapi"
	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/rpc"
)

// boxd serves the Docker Engine API on --docker-socket (docs/docker.md),
// with the main socket's group and callers identified the same way.

func dockerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "docker-socket", Usage: "also serve the Docker Engine API on this Unix socket (DOCKER_HOST=unix://PATH), with --socket-group and --admin-group as on the main socket (default: off)"},
		&cli.StringFlag{Name: "docker-default-network", Value: "none", Usage: "what a Docker container's NetworkMode default or bridge gets: none, or egress (to --docker-default-allow)"},
		&cli.StringSliceFlag{Name: "docker-default-allow", Usage: "egress allowlist entry of --docker-default-network egress (repeatable; as create --allow)"},
		&cli.DurationFlag{Name: "docker-default-ttl", Usage: "lifetime of a container made through --docker-socket (default: --default-ttl)"},
	}
}

// checkDockerFlags checks the Docker endpoint's flags before boxd touches
// the host.
func checkDockerFlags(cc *cli.Context) error {
	switch cc.String("docker-default-network") {
	case "none":
		if len(cc.StringSlice("docker-default-allow")) > 0 {
			return fmt.Errorf("--docker-default-allow: needs --docker-default-network egress")
		}
	case "egress":
		for _, a := range cc.StringSlice("docker-default-allow") {
			if _, err := network.ParseDest(a); err != nil {
				return fmt.Errorf("--docker-default-allow: %w", err)
			}
		}
	default:
		return fmt.Errorf("--docker-default-network: %q is not none or egress", cc.String("docker-default-network"))
	}
	if d := cc.Duration("docker-default-ttl"); d < 0 {
		return fmt.Errorf("--docker-default-ttl: %v must not be negative", d)
	}
	return nil
}

// serveDocker starts the Docker endpoint if --docker-socket is set; the
// returned stop closes it.
func serveDocker(ctx context.Context, cc *cli.Context, log *slog.Logger, srv *rpc.Server, gid int) (func(), error) {
	path := cc.String("docker-socket")
	if path == "" {
		return func() {}, nil
	}
	if err := checkDockerFlags(cc); err != nil {
		return nil, err
	}
	ln, err := rpc.Listen(path, gid)
	if err != nil {
		return nil, fmt.Errorf("--docker-socket: %w", err)
	}
	d := &dockerapi.Server{Manager: srv.Manager, Images: srv.Images, Registry: srv.Registry, Log: log.With("api", "docker"),
		Audit: srv.Audit, Events: srv.Events, ConnContext: srv.CallerContext, StateDir: filepath.Join(cc.String("state-dir"), "docker"),
		DefaultTTL: cc.Duration("docker-default-ttl"), Version: "boxd"}
	if cc.String("docker-default-network") == "egress" {
		d.DefaultNetwork, d.DefaultAllow = "egress", cc.StringSlice("docker-default-allow")
	}
	if err := os.MkdirAll(d.StateDir, 0o700); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--docker-socket: %w", err)
	}
	dctx, cancel := context.WithCancel(ctx)
	go func() {
		if err := d.Serve(dctx, ln); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error("docker endpoint stopped", "err", err)
		}
	}()
	log.Info("serving the Docker Engine API", "socket", path)
	return func() {
		cancel()
		ln.Close()
		os.Remove(path)
	}, nil
}
