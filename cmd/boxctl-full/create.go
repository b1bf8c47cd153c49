package main

import (
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func createFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "image", Usage: "image reference (default: the daemon's)"},
		&cli.StringFlag{Name: "memory", Usage: "memory limit, e.g. 256m, 1g"},
		&cli.Float64Flag{Name: "cpus", Usage: "CPU quota in cores, e.g. 1.5"},
		&cli.Int64Flag{Name: "pids", Usage: "maximum number of processes"},
		&cli.StringFlag{Name: "disk", Usage: "disk cap of the writable layer and /workspace, e.g. 2g (writes past it fail with ENOSPC)"},
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "K=V, repeatable"},
		&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "working directory (default /workspace)"},
		&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "K=V, repeatable"},
		&cli.StringFlag{Name: "name"},
		&cli.StringFlag{Name: "ttl", Usage: "lifetime, e.g. 30m, 1h (default: the daemon's)"},
		&cli.StringFlag{Name: "network", Value: "none", Usage: "none (loopback only) or egress (only the --allow destinations)"},
		&cli.StringSliceFlag{Name: "allow", Usage: "egress destination, repeatable: CIDR[:PORT], NAME[:PORT], *.SUFFIX, '*'"},
		&cli.StringFlag{Name: "idle-timeout", Usage: "pause or delete (--on-idle) the sandbox after this long without an exec, file call or attached stream, e.g. 15m (0: never; default: the daemon's)"},
		&cli.StringFlag{Name: "on-idle", Usage: "what the idle timeout does: pause, delete or checkpoint (gvisor: to disk, memory freed; implies --auto-resume) (default: the daemon's)"},
		&cli.StringFlag{Name: "pull", Value: "never", Usage: "pull the image from its registry first: never, missing (only if not here) or always (credentials: ~/.docker/config.json)"},
		&cli.StringSliceFlag{Name: "publish", Aliases: []string{"p"}, Usage: "[ADDR:]HOSTPORT:PORT: reach sandbox port PORT at ADDR:HOSTPORT on the host (default ADDR 127.0.0.1; HOSTPORT 0: a free one), repeatable"},
		&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "default user of exec, files and sessions: NAME, UID, NAME:GROUP or UID:GID (default: the image's USER, else root)"},
		&cli.BoolFlag{Name: "read-only", Usage: "mount the root filesystem read-only (/workspace becomes a tmpfs)"},
		&cli.StringSliceFlag{Name: "tmpfs", Usage: "PATH[:SIZE] tmpfs mount (default size 64m, at most the memory limit), repeatable; /tmp and /dev/shm resize boxd's own"},
		&cli.StringSliceFlag{Name: "ulimit", Usage: "NAME=VALUE[,NAME=VALUE]: nofile, nproc, cpu (seconds), fsize (size), repeatable"},
		&cli.StringFlag{Name: "hostname", Usage: "host name (RFC 1123; default the sandbox id)"},
		&cli.Uint64Flag{Name: "cpu-weight", Usage: "CPU weight under contention, 1-10000 (default 100)"},
		&cli.StringFlag{Name: "memory-low", Usage: "memory protected from reclaim, e.g. 64m (at most --memory)"},
		&cli.StringFlag{Name: "exec-timeout", Usage: "default timeout of exec in this sandbox, e.g. 120s"},
		&cli.Int64Flag{Name: "output-limit", Usage: "default output cap of exec in this sandbox, in bytes"},
		&cli.BoolFlag{Name: "replace", Usage: "delete a sandbox of the same --name first (gracefully)"},
		&cli.StringFlag{Name: "runtime", Usage: "runc or gvisor (gVisor's user-space kernel between the sandbox and the host's); default: the daemon's --default-runtime"},
		&cli.BoolFlag{Name: "cold", Usage: "start the sandbox from its image even if a warm-pool member could serve the create"},
		&cli.StringSliceFlag{Name: "volume", Aliases: []string{"v"}, Usage: "NAME:/PATH[:ro]: mount a named volume (boxctl volume create), repeatable"},
		&cli.StringSliceFlag{Name: "secret", Usage: "NAME[=ENVVAR]: give the sandbox a placeholder of your secret NAME in ENVVAR (default NAME); boxd swaps in the value only in requests to the secret's hosts (needs --network egress), repeatable"},
		&cli.StringSliceFlag{Name: "bind", Usage: "HOST-PATH:/PATH[:ro][,noexec]: mount a host directory you can open yourself, beneath one boxd allows (boxd --allow-bind); the sandbox's root acts as you there, repeatable"},
		&cli.BoolFlag{Name: "auto-resume", Usage: "a call into the sandbox (exec, files, processes, sessions) restores it from its checkpoint or resumes it from a pause first"},
		&cli.StringFlag{Name: "git", Usage: "URL[#REF]: clone a public repository (https, http or git://) into /workspace before create returns; runs inside the sandbox with the image's git, under its --network egress policy"},
		&cli.UintFlag{Name: "git-depth", Usage: "with --git: clone only the last N commits (default: all)"},
	}
}

func parseKV(flag string, vals []string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range vals {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want K=V", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

func createRequest(c *cli.Context) (*boxdv1.CreateSandboxRequest, error) {
	labels, err := parseKV("label", c.StringSlice("label"))
	if err != nil {
		return nil, err
	}
	publish, err := publishList(c.StringSlice("publish"))
	if err != nil {
		return nil, err
	}
	limits, err := limitFlags(c)
	if err != nil {
		return nil, err
	}
	limits.Disk = c.String("disk")
	var auth *boxdv1.RegistryAuth
	if p := c.String("pull"); p != "" && p != "never" {
		if auth, err = dockerConfigAuth(registryHost(c.String("image"))); err != nil {
			return nil, err
		}
	}
	return &boxdv1.CreateSandboxRequest{
		Pull:         c.String("pull"),
		RegistryAuth: auth,
		Publish:      publish,
		Image:        c.String("image"),
		Limits:       limits,
		Env:          c.StringSlice("env"),
		Workdir:      c.String("workdir"),
		Labels:       labels,
		Name:         c.String("name"),
		Ttl:          c.String("ttl"),
		IdleTimeout:  c.String("idle-timeout"),
		OnIdle:       c.String("on-idle"),
		Network:      &boxdv1.NetworkRequest{Mode: c.String("network"), Allow: c.StringSlice("allow")},

		User: c.String("user"), ReadOnlyRootfs: c.Bool("read-only"), Tmpfs: c.StringSlice("tmpfs"), Ulimits: c.StringSlice("ulimit"),
		Hostname: c.String("hostname"), CpuWeight: c.Uint64("cpu-weight"), MemoryLow: c.String("memory-low"),
		ExecTimeout: c.String("exec-timeout"), OutputLimit: c.Int64("output-limit"), Replace: c.Bool("replace"), Runtime: c.String("runtime"),
		Cold: c.Bool("cold"), Volumes: c.StringSlice("volume"), Binds: c.StringSlice("bind"), Secrets: c.StringSlice("secret"),
		AutoResume: c.Bool("auto-resume"),
		Git:        c.String("git"), GitDepth: uint32(c.Uint("git-depth")),
	}, nil
}

func createCommand() *cli.Command {
	return &cli.Command{
		Name:      "create",
		Usage:     "create a sandbox and print its id",
		ArgsUsage: " ",
		Flags:     createFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("create takes no arguments (got %q); flags go before them", c.Args().First())
			}
			req, err := createRequest(c)
			if err != nil {
				return err
			}
			resp, err := apiClient(c).CreateSandbox(c.Context, connect.NewRequest(req))
			if err != nil {
				return err
			}
			fmt.Println(resp.Msg.Sandbox.Id)
			return nil
		},
	}
}
