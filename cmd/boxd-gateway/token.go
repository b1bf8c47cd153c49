//go:build linux

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/rpc"
)

func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "manage the gateway's tokens",
		Subcommands: []*cli.Command{{
			Name:  "create",
			Usage: "create a token and print its secret (shown once)",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "tokens", Value: "/var/lib/boxd-gateway/tokens.json", Usage: "the gateway's token file"},
				&cli.StringFlag{Name: "name", Required: true, Usage: "the token's name"},
				&cli.UintFlag{Name: "uid", Required: true, Usage: "the owner the token acts as on the nodes"},
				&cli.StringFlag{Name: "scope", Value: rpc.ScopeWrite, Usage: "read, exec or write"},
				&cli.StringFlag{Name: "ttl", Value: "720h", Usage: "how long the token lasts"},
			},
			Action: func(cc *cli.Context) error {
				ts, err := rpc.OpenTokens(cc.String("tokens"))
				if err != nil {
					return err
				}
				ttl, err := rpc.ParseTokenTTL(cc.String("ttl"))
				if err != nil {
					return err
				}
				if s := cc.String("scope"); s == rpc.ScopeAdmin || s == rpc.ScopeMetrics {
					return fmt.Errorf("--scope %s: a gateway token acts for a user: read, exec or write", s)
				}
				_, secret, err := ts.Create(cc.String("name"), uint32(cc.Uint("uid")), cc.String("scope"), ttl)
				if err != nil {
					return err
				}
				fmt.Println(secret)
				return nil
			},
		}},
	}
}
