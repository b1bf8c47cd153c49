package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func updateCommand() *cli.Command {
	return &cli.Command{
		Name:      "update",
		Usage:     "change a sandbox's limits, TTL, and the env and workdir of later commands",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "ttl", Usage: "new lifetime from now, e.g. 2h"},
			&cli.StringFlag{Name: "extend", Usage: "add to the current expiry, e.g. 30m"},
			&cli.StringFlag{Name: "memory", Usage: "memory limit, e.g. 512m"},
			&cli.Float64Flag{Name: "cpus", Usage: "CPU quota in cores"},
			&cli.Int64Flag{Name: "pids", Usage: "maximum number of processes"},
			&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "K=V for later commands, repeatable"},
			&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "working directory of later commands"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl update [flags] ID")
			}
			limits, err := limitFlags(c)
			if err != nil {
				return err
			}
			resp, err := apiClient(c).UpdateSandbox(c.Context, connect.NewRequest(&boxdv1.UpdateSandboxRequest{
				SandboxId: c.Args().First(), Ttl: c.String("ttl"), Extend: c.String("extend"),
				Limits: limits, Env: c.StringSlice("env"), Workdir: c.String("workdir"),
			}))
			if err != nil {
				return err
			}
			return printJSON(resp.Msg.Sandbox)
		},
	}
}
