package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func lsCommand() *cli.Command {
	return &cli.Command{
		Name:  "ls",
		Usage: "list sandboxes",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "only sandboxes with K=V, repeatable"},
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "every user's sandboxes (root and boxd's --admin-group only)"},
			&cli.StringFlag{Name: "owner", Usage: "only this user's sandboxes (user name or uid; another user's: admins only)"},
		},
		Action: func(c *cli.Context) error {
			labels, err := parseKV("label", c.StringSlice("label"))
			if err != nil {
				return err
			}
			resp, err := apiClient(c).ListSandboxes(c.Context, connect.NewRequest(&boxdv1.ListSandboxesRequest{Labels: labels, All: c.Bool("all"), Owner: c.String("owner")}))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSONArray(resp.Msg.Sandboxes)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tOWNER\tIMAGE\tSTATE\tMEMORY\tCPUS\tPIDS\tEXPIRES")
			for _, sb := range resp.Msg.Sandboxes {
				exp := sb.ExpiresAt
				if t, err := time.Parse(time.RFC3339Nano, exp); err == nil {
					exp = "in " + time.Until(t).Round(time.Second).String()
				}
				owner := sb.Owner
				if owner == "" {
					owner = fmt.Sprint(sb.OwnerUid)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%g\t%d\t%s\n", sb.Id, dash(sb.Name), owner, sb.Image, sb.State, humanBytes(sb.MemoryBytes), sb.Cpus, sb.Pids, exp)
			}
			return tw.Flush()
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func humanBytes(b int64) string {
	for _, u := range []struct {
		n int64
		s string
	}{{1 << 30, "g"}, {1 << 20, "m"}, {1 << 10, "k"}} {
		if b >= u.n && b%u.n == 0 {
			return fmt.Sprintf("%d%s", b/u.n, u.s)
		}
	}
	return fmt.Sprint(b)
}

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "print a sandbox's settings and state as JSON",
		ArgsUsage: "ID",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl inspect ID")
			}
			resp, err := apiClient(c).GetSandbox(c.Context, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: c.Args().First()}))
			if err != nil {
				return err
			}
			return printJSON(resp.Msg.Sandbox)
		},
	}
}

func rmCommand() *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "delete sandboxes and their data: SIGTERM to every process, SIGKILL after --time",
		ArgsUsage: "ID... | --label K=V",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "SIGKILL at once, and ignore sandboxes that do not exist"},
			&cli.DurationFlag{Name: "time", Aliases: []string{"t"}, Value: 10 * time.Second, Usage: "grace period between SIGTERM and SIGKILL"},
			&cli.StringSliceFlag{Name: "label", Aliases: []string{"l"}, Usage: "remove every sandbox with K=V (repeatable: all must match)"},
		},
		Action: func(c *cli.Context) error {
			labels, err := parseKV("label", c.StringSlice("label"))
			if err != nil {
				return err
			}
			if (c.NArg() == 0) == (len(labels) == 0) {
				return fmt.Errorf("usage: boxctl rm [-f] [--time D] ID... | boxctl rm [-f] --label K=V")
			}
			api := apiClient(c)
			ids := c.Args().Slice()
			if len(labels) > 0 {
				resp, err := api.ListSandboxes(c.Context, connect.NewRequest(&boxdv1.ListSandboxesRequest{Labels: labels}))
				if err != nil {
					return err
				}
				for _, sb := range resp.Msg.Sandboxes {
					ids = append(ids, sb.Id)
				}
			}
			req := &boxdv1.DeleteSandboxRequest{Timeout: c.Duration("time").String(), Force: c.Bool("force")}
			var failed []string
			for _, id := range ids {
				req.Id = id
				_, err := api.DeleteSandbox(c.Context, connect.NewRequest(req))
				if err != nil {
					if (c.Bool("force") || len(labels) > 0) && connect.CodeOf(err) == connect.CodeNotFound {
						continue // gone meanwhile
					}
					fmt.Fprintf(os.Stderr, "boxctl: rm %s: %s\n", id, describe(err))
					failed = append(failed, id)
					continue
				}
				fmt.Println(id)
			}
			if len(failed) > 0 {
				return exitError{1}
			}
			return nil
		},
	}
}
