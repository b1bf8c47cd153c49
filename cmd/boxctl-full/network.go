package main

import (
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func networkCommand() *cli.Command {
	change := func(name, usage string, deny bool) *cli.Command {
		return &cli.Command{
			Name:      name,
			Usage:     usage,
			ArgsUsage: "ID DEST...",
			Action: func(c *cli.Context) error {
				if c.NArg() < 2 {
					return fmt.Errorf("usage: boxctl network %s ID DEST...", name)
				}
				req := &boxdv1.UpdateNetworkRequest{SandboxId: c.Args().First()}
				if deny {
					req.Deny = c.Args().Tail()
				} else {
					req.Allow = c.Args().Tail()
				}
				resp, err := apiClient(c).UpdateNetwork(c.Context, connect.NewRequest(req))
				if err != nil {
					return err
				}
				fmt.Println(strings.Join(resp.Msg.Network.Allow, "\n"))
				return nil
			},
		}
	}
	return &cli.Command{
		Name:  "network",
		Usage: "change a running egress sandbox's allowlist",
		Subcommands: []*cli.Command{
			change("allow", "add destinations to the allowlist (prints the new list)", false),
			change("deny", "remove destinations from the allowlist (prints the new list)", true),
		},
	}
}
