package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func startCommand() *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "start a stopped sandbox again (a new init on the same files)",
		ArgsUsage: "ID",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl start ID")
			}
			resp, err := apiClient(c).StartSandbox(c.Context, connect.NewRequest(&boxdv1.StartSandboxRequest{SandboxId: c.Args().First()}))
			if err != nil {
				return err
			}
			fmt.Println(resp.Msg.Sandbox.Id)
			return nil
		},
	}
}
