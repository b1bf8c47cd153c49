package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func killCommand() *cli.Command {
	return &cli.Command{
		Name:      "kill",
		Usage:     "signal a background process: SIGKILL (the default) kills its whole tree, other signals go to its process group",
		ArgsUsage: "ID PROC | --all ID",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "signal", Aliases: []string{"s"}, Value: "SIGKILL", Usage: "signal name or number, e.g. TERM, SIGINT, 15"},
			&cli.BoolFlag{Name: "all", Usage: "kill every process that execs left running in the sandbox (boxctl kill --all ID)"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("all") {
				if c.NArg() != 1 {
					return fmt.Errorf("usage: boxctl kill --all ID")
				}
				_, err := processClient(c).Signal(c.Context, connect.NewRequest(&boxdv1.SignalProcessRequest{
					SandboxId: c.Args().Get(0), All: true,
				}))
				return err
			}
			if c.NArg() != 2 {
				return fmt.Errorf("usage: boxctl kill [-s SIGNAL] ID PROC")
			}
			_, err := processClient(c).Signal(c.Context, connect.NewRequest(&boxdv1.SignalProcessRequest{
				SandboxId: c.Args().Get(0), ProcessId: c.Args().Get(1), Signal: c.String("signal"),
			}))
			return err
		},
	}
}
