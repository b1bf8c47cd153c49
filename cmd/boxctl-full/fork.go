package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func forkCommand() *cli.Command {
	return &cli.Command{
		Name:      "fork",
		Usage:     "make N new sandboxes whose files start as a copy of a running sandbox's; prints their ids, one a line",
		ArgsUsage: "ID",
		Description: "The source is frozen for a moment while its files are copied, then runs on. Only files are\n" +
			"copied: processes are not, and each fork starts with a fresh init. Forks take the source's\n" +
			"limits, env, workdir, labels and network unless the flags set them (--env and --label add).\n" +
			"The source's volumes are mounted read-only in each fork unless --clone-volumes or --share-volumes.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "n", Usage: "how many forks (default: one per --name, or 1)"},
			&cli.StringSliceFlag{Name: "name", Usage: "a fork's name, repeatable (one per fork)"},
			&cli.StringFlag{Name: "memory", Usage: "memory limit, e.g. 256m (default: the source's)"},
			&cli.Float64Flag{Name: "cpus", Usage: "CPU quota in cores (default: the source's)"},
			&cli.Int64Flag{Name: "pids", Usage: "maximum number of processes (default: the source's)"},
			&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "K=V added to the source's env, repeatable"},
			&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "working directory (default: the source's)"},
			&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "K=V added to the source's labels, repeatable"},
			&cli.StringFlag{Name: "ttl", Usage: "lifetime, e.g. 30m (default: the daemon's)"},
			&cli.BoolFlag{Name: "clone-volumes", Usage: "give each fork a clone of each of the source's volumes (new volumes named VOLUME-FORKID, yours to remove)"},
			&cli.BoolFlag{Name: "share-volumes", Usage: "mount the source's volumes as it does (only volumes created --shared); default: read-only"},
			&cli.BoolFlag{Name: "with-processes", Usage: "ask for forks that continue the source's processes and memory: refused, naming why (see docs/checkpoint.md)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl fork [-n N] [--name NAME]... ID")
			}
			n := c.Int("n")
			if n < 0 {
				return fmt.Errorf("-n %d: must be positive", n)
			}
			labels, err := parseKV("label", c.StringSlice("label"))
			if err != nil {
				return err
			}
			limits, err := limitFlags(c)
			if err != nil {
				return err
			}
			resp, err := apiClient(c).ForkSandbox(c.Context, connect.NewRequest(&boxdv1.ForkSandboxRequest{
				SandboxId: c.Args().First(), Count: uint32(n), Names: c.StringSlice("name"),
				Limits: limits, Env: c.StringSlice("env"), Workdir: c.String("workdir"), Labels: labels, Ttl: c.String("ttl"),
				CloneVolumes: c.Bool("clone-volumes"), ShareVolumes: c.Bool("share-volumes"),
				WithProcesses: c.Bool("with-processes"),
			}))
			if err != nil {
				return err
			}
			for _, sb := range resp.Msg.Sandboxes {
				fmt.Println(sb.Id)
			}
			return nil
		},
	}
}
