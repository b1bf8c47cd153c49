package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

func execFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "timeout", Usage: "kill the command's whole process tree after this long and exit 124, e.g. 5s"},
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "K=V for this command, repeatable"},
		&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "working directory for this command"},
	}
}

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a command in a sandbox; exits with the command's exit code",
		ArgsUsage: "ID -- CMD [ARG...]",
		Flags:     execFlags(),
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) < 2 {
				return fmt.Errorf("usage: boxctl exec [flags] ID -- CMD [ARG...]")
			}
			id, cmd := args[0], args[1:]
			if cmd[0] == "--" {
				cmd = cmd[1:]
			}
			if len(cmd) == 0 {
				return fmt.Errorf("usage: boxctl exec [flags] ID -- CMD [ARG...]: no command")
			}
			return runExec(c.Context, apiClient(c), execRequest(c, id, cmd))
		},
	}
}

func execRequest(c *cli.Context, id string, cmd []string) *boxdv1.ExecRequest {
	return &boxdv1.ExecRequest{
		SandboxId: id, Args: cmd, Env: c.StringSlice("env"), Workdir: c.String("workdir"), Timeout: c.String("timeout"),
	}
}

// runExec streams a command's output to boxctl's stdout and stderr and
// returns exitError with the command's code.
func runExec(ctx context.Context, api boxdv1connect.SandboxServiceClient, req *boxdv1.ExecRequest) error {
	stream, err := api.ExecStream(ctx, connect.NewRequest(req))
	if err != nil {
		return boxdErr{err}
	}
	defer stream.Close()
	var res *boxdv1.ExecResult
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *boxdv1.ExecStreamResponse_Stdout:
			if _, err := os.Stdout.Write(ev.Stdout); err != nil && err != io.ErrShortWrite {
				return err
			}
		case *boxdv1.ExecStreamResponse_Stderr:
			_, _ = os.Stderr.Write(ev.Stderr)
		case *boxdv1.ExecStreamResponse_Result:
			res = ev.Result
		}
	}
	if err := stream.Err(); err != nil {
		return boxdErr{err}
	}
	if res == nil {
		return boxdErr{fmt.Errorf("exec: boxd ended the stream without a result")}
	}
	if res.Truncated {
		fmt.Fprintln(os.Stderr, "boxctl: output truncated at the output limit")
	}
	if res.ExitCode != 0 {
		return exitError{int(res.ExitCode)}
	}
	return nil
}
