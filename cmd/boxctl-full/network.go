package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

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
		Usage: "change a running egress sandbox's allowlist, or see what it was refused",
		Subcommands: []*cli.Command{
			change("allow", "add destinations to the allowlist (prints the new list)", false),
			change("deny", "remove destinations from the allowlist (prints the new list)", true),
			networkLogCommand(),
		},
	}
}

// networkLogCommand prints a sandbox's deny log: one line per record,
// oldest first.
func networkLogCommand() *cli.Command {
	return &cli.Command{
		Name:      "log",
		Usage:     "show the connections and DNS names boxd refused the sandbox (10 s windows, with counts)",
		ArgsUsage: "ID",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the records as JSON"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl network log ID")
			}
			resp, err := apiClient(c).NetworkLog(c.Context, connect.NewRequest(&boxdv1.NetworkLogRequest{SandboxId: c.Args().First()}))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSONArray(resp.Msg.Denials)
			}
			// dest is escaped by boxd (no control bytes), see NetworkLog.
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FIRST\tCOUNT\tREASON\tPROTO\tDEST\tPORT")
			for _, d := range resp.Msg.Denials {
				port := "-"
				if d.Port != 0 {
					port = strconv.Itoa(int(d.Port))
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", d.First, d.Count, d.Reason, d.Proto, d.Dest, port)
			}
			return tw.Flush()
		},
	}
}
