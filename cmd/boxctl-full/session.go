package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func sessionCommand() *cli.Command {
	return &cli.Command{
		Name:  "session",
		Usage: "persistent shells: cd, export and functions carry over from one command to the next",
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "start a named shell in a sandbox",
				ArgsUsage: "ID NAME",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "shell", Value: "sh", Usage: "the shell: sh, bash, or any POSIX shell in the sandbox"},
					&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "NAME, UID, NAME:GROUP or UID:GID"},
					&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "K=V, repeatable"},
					&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "starting directory"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return fmt.Errorf("usage: boxctl session create [flags] ID NAME")
					}
					_, err := processClient(c).CreateSession(c.Context, connect.NewRequest(&boxdv1.CreateSessionRequest{
						SandboxId: c.Args().Get(0), Name: c.Args().Get(1), Shell: c.String("shell"),
						User: c.String("user"), Env: c.StringSlice("env"), Workdir: c.String("workdir"),
					}))
					return err
				},
			},
			{
				Name:      "exec",
				Aliases:   []string{"run"},
				Usage:     "run a command line in a session; exits with its exit code (124 on timeout)",
				ArgsUsage: "ID NAME -- COMMAND...",
				Description: "The words after -- are joined with spaces and run by the session's shell as if\n" +
					"typed at its prompt, with stdin from /dev/null. On timeout the processes the\n" +
					"command started are killed and the shell lives on; if the command is a loop the\n" +
					"shell runs itself, the shell is replaced and the session's state is lost.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "timeout", Usage: "stop the command after this long, e.g. 5s"},
				},
				Action: func(c *cli.Context) error {
					args := c.Args().Slice()
					if len(args) > 2 && args[2] == "--" {
						args = append(args[:2], args[3:]...)
					}
					if len(args) < 3 {
						return fmt.Errorf("usage: boxctl session exec [--timeout D] ID NAME -- COMMAND...")
					}
					return sessionExec(c, args[0], args[1], strings.Join(args[2:], " "))
				},
			},
			{
				Name:      "ls",
				Usage:     "list a sandbox's sessions",
				ArgsUsage: "ID",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action:    sessionList,
			},
			{
				Name:      "rm",
				Usage:     "end sessions: their shells and everything they started are killed",
				ArgsUsage: "ID NAME...",
				Action: func(c *cli.Context) error {
					if c.NArg() < 2 {
						return fmt.Errorf("usage: boxctl session rm ID NAME...")
					}
					api := processClient(c)
					var errs []error
					for _, name := range c.Args().Slice()[1:] {
						_, err := api.DeleteSession(c.Context, connect.NewRequest(&boxdv1.DeleteSessionRequest{SandboxId: c.Args().First(), Name: name}))
						if err != nil {
							errs = append(errs, fmt.Errorf("%s: %s", name, describe(err)))
						}
					}
					return errors.Join(errs...)
				},
			},
		},
	}
}

// sessionList prints a sandbox's sessions.
func sessionList(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("usage: boxctl session ls [--json] ID")
	}
	resp, err := processClient(c).ListSessions(c.Context, connect.NewRequest(&boxdv1.ListSessionsRequest{SandboxId: c.Args().First()}))
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSONArray(resp.Msg.Sessions)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSHELL\tUSER\tPID\tSTATE\tCOMMANDS\tRESTARTS\tCREATED")
	for _, s := range resp.Msg.Sessions {
		state := "idle"
		if s.Busy {
			state = "busy"
		}
		created := s.CreatedAt
		if t, err := time.Parse(time.RFC3339Nano, created); err == nil {
			created = time.Since(t).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", s.Name, s.Shell, dash(s.User), s.Pid, state, s.Commands, s.Restarts, created)
	}
	return tw.Flush()
}

func sessionExec(c *cli.Context, id, name, command string) error {
	stream, err := processClient(c).SessionExec(c.Context, connect.NewRequest(&boxdv1.SessionExecRequest{
		SandboxId: id, Name: name, Command: command, Timeout: c.String("timeout"),
	}))
	if err != nil {
		return boxdErr{err}
	}
	defer stream.Close()
	var res *boxdv1.SessionExecResult
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *boxdv1.SessionExecResponse_Stdout:
			if _, err := os.Stdout.Write(ev.Stdout); err != nil && err != io.ErrShortWrite {
				return err
			}
		case *boxdv1.SessionExecResponse_Stderr:
			_, _ = os.Stderr.Write(ev.Stderr)
		case *boxdv1.SessionExecResponse_Result:
			res = ev.Result
		}
	}
	if err := stream.Err(); err != nil {
		return boxdErr{err}
	}
	if res == nil || res.Result == nil {
		return boxdErr{fmt.Errorf("session exec: boxd ended the stream without a result")}
	}
	switch {
	case res.SessionRestarted:
		fmt.Fprintf(os.Stderr, "boxctl: session %s: the shell had to be replaced to stop the command; its state (directory, variables, jobs) is lost\n", name)
	case res.SessionEnded:
		fmt.Fprintf(os.Stderr, "boxctl: session %s: the shell exited; the session is gone\n", name)
	}
	return exitWith(res.Result)
}
