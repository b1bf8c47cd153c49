package main

import (
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func poolCommand() *cli.Command {
	return &cli.Command{
		Name:  "pool",
		Usage: "warm pools: idle sandboxes per image that serve the creates they fit",
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "set an image's pool size (admins only; lasts until boxd restarts; 0 empties it)",
				ArgsUsage: "IMAGE N",
				Flags:     []cli.Flag{&cli.StringFlag{Name: "runtime", Usage: "the members' runtime: runc (the default) or gvisor; each runtime has its own pool"}},
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return fmt.Errorf("usage: boxctl pool set IMAGE N")
					}
					n, err := strconv.Atoi(c.Args().Get(1))
					if err != nil || n < 0 {
						return fmt.Errorf("boxctl pool set: N %q is not a number of members", c.Args().Get(1))
					}
					resp, err := rpcclient.NewPool(c.String("socket")).SetPoolSize(c.Context, connect.NewRequest(&boxdv1.SetPoolSizeRequest{
						Image: c.Args().Get(0), Size: int32(n), Runtime: c.String("runtime"),
					}))
					if err != nil {
						return boxdErr{err}
					}
					p := resp.Msg.Pool
					fmt.Printf("%s (%s): size %d (%d ready, %d starting)\n", p.Image, p.Runtime, p.Size, p.Ready, p.Starting)
					return nil
				},
			},
			{
				Name:  "ls",
				Usage: "list the pools: size, ready and starting members, and creates handed a member or made cold",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *cli.Context) error {
					resp, err := rpcclient.NewPool(c.String("socket")).ListPools(c.Context, connect.NewRequest(&boxdv1.ListPoolsRequest{}))
					if err != nil {
						return boxdErr{err}
					}
					if c.Bool("json") {
						return printJSONArray(resp.Msg.Pools)
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "IMAGE\tSIZE\tREADY\tSTARTING\tRUNTIME\tNETWORK\tHANDED OUT\tCOLD (EMPTY)\tCOLD (UNFIT)")
					for _, p := range resp.Msg.Pools {
						netw := p.Network
						if netw == "" {
							netw = "none"
						}
						fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\n", p.Image, p.Size, p.Ready, p.Starting, p.Runtime, netw, p.HandedOut, p.ColdEmpty, p.ColdUnfit)
					}
					return tw.Flush()
				},
			},
		},
	}
}
