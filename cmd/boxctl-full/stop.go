package main

import (
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop every process of a sandbox (SIGTERM, SIGKILL after --time); its files are kept",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "time", Aliases: []string{"t"}, Value: 10 * time.Second, Usage: "grace period between SIGTERM and SIGKILL"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl stop [--time D] ID")
			}
			resp, err := apiClient(c).StopSandbox(c.Context, connect.NewRequest(&boxdv1.StopSandboxRequest{
				SandboxId: c.Args().First(), Timeout: c.Duration("time").String(),
			}))
			if err != nil {
				return err
			}
			fmt.Println(resp.Msg.Sandbox.Id)
			return nil
		},
	}
}
