package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

func processClient(c *cli.Context) boxdv1connect.ProcessServiceClient {
	return rpcclient.NewProcess(c.String("socket"))
}

func psCommand() *cli.Command {
	return &cli.Command{
		Name:      "ps",
		Usage:     "list a sandbox's background processes (exec -d), running and exited",
		ArgsUsage: "ID",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("usage: boxctl ps [--json] ID")
			}
			resp, err := processClient(c).List(c.Context, connect.NewRequest(&boxdv1.ListProcessesRequest{SandboxId: c.Args().First()}))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSONArray(resp.Msg.Processes)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROC\tPID\tSTATE\tEXIT\tSTARTED\tUSER\tCOMMAND")
			for _, p := range resp.Msg.Processes {
				exit := "-"
				if r := p.Result; r != nil {
					exit = fmt.Sprint(r.ExitCode)
					if r.Signal != "" {
						exit += " (" + r.Signal + ")"
					}
					if r.TimedOut {
						exit += " (timeout)"
					}
				}
				started := p.StartedAt
				if t, err := time.Parse(time.RFC3339Nano, started); err == nil {
					started = time.Since(t).Round(time.Second).String() + " ago"
				}
				user := dash(p.User)
				cmd := strings.Join(p.Args, " ")
				if len(cmd) > 60 {
					cmd = cmd[:57] + "..."
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Id, p.Pid, p.State, exit, started, user, cmd)
			}
			return tw.Flush()
		},
	}
}

func waitCommand() *cli.Command {
	return &cli.Command{
		Name:      "wait",
		Usage:     "wait for a background process to exit and print its exit code",
		ArgsUsage: "ID PROC",
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return fmt.Errorf("usage: boxctl wait ID PROC")
			}
			resp, err := processClient(c).Wait(c.Context, connect.NewRequest(&boxdv1.WaitProcessRequest{
				SandboxId: c.Args().Get(0), ProcessId: c.Args().Get(1),
			}))
			if err != nil {
				return err
			}
			if r := resp.Msg.Process.Result; r != nil {
				fmt.Println(r.ExitCode)
			}
			return nil
		},
	}
}
