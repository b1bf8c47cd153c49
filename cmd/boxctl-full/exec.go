package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
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
		Flags: append(execFlags(),
			&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "pass boxctl's stdin to the command (EOF closes it)"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "give the command a terminal; with -i, boxctl's terminal goes raw"},
			&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "run in the background and print the process id (see ps, attach, kill)"},
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "run as NAME, UID, NAME:GROUP or UID:GID of the sandbox"},
			&cli.BoolFlag{Name: "resume", Usage: "unpause the sandbox first if it is paused (else exec in a paused sandbox fails)"},
			&cli.BoolFlag{Name: "stats", Usage: "print what the command used (CPU, peak memory, storage I/O, wall time) on stderr"},
		),
		UseShortOptionHandling: true,
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
			// One API for every combination of flags: ProcessService
			// (Exec, or Start with -d). The front binary serves the plain
			// case itself over SandboxService.ExecStream (see
			// docs/exec.md), which reaches the same call in boxd.
			if c.Bool("resume") {
				// The process API has no resume flag: unpause first (a
				// sandbox that is not paused is fine).
				_, err := apiClient(c).UnpauseSandbox(c.Context, connect.NewRequest(&boxdv1.UnpauseSandboxRequest{Id: id}))
				if err != nil && connect.CodeOf(err) != connect.CodeFailedPrecondition {
					return boxdErr{err}
				}
				if err := restoreIfCheckpointed(c, id); err != nil {
					return boxdErr{err}
				}
			}
			spec := &boxdv1.ProcessSpec{
				SandboxId: id, Args: cmd, Env: c.StringSlice("env"), Workdir: c.String("workdir"),
				Timeout: c.String("timeout"), User: c.String("user"), Tty: c.Bool("tty"),
			}
			api := rpcclient.NewProcess(c.String("socket"))
			if c.Bool("detach") {
				spec.KeepStdinOpen = c.Bool("interactive")
				resp, err := api.Start(c.Context, connect.NewRequest(&boxdv1.StartProcessRequest{Spec: spec}))
				if err != nil {
					return boxdErr{err}
				}
				fmt.Println(resp.Msg.Process.Id)
				return nil
			}
			return runProcess(c.Context, api, spec, c.Bool("interactive"), c.Bool("stats"))
		},
	}
}

// runProcess runs a command through ProcessService.Exec: stdin streamed
// with -i, a terminal with -t. It returns exitError with the command's
// code.
func runProcess(ctx context.Context, api boxdv1connect.ProcessServiceClient, spec *boxdv1.ProcessSpec, interactive, stats bool) error {
	raw := spec.Tty && interactive
	if raw && !isTerminal(os.Stdin) {
		return boxdErr{fmt.Errorf("exec -it: stdin is not a terminal (drop -t to pipe input)")}
	}
	if raw {
		// A terminal session may run for hours: no output cap.
		spec.OutputLimit = -1
	}
	if spec.Tty {
		spec.Window = windowSize()
		if !slices.ContainsFunc(spec.Env, func(kv string) bool { return strings.HasPrefix(kv, "TERM=") }) {
			if t := os.Getenv("TERM"); t != "" {
				spec.Env = append(spec.Env, "TERM="+t)
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &procConn{stream: api.Exec(ctx)}
	if err := p.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Start{Start: spec}}); err != nil {
		return boxdErr{err}
	}
	if raw {
		restore, err := p.rawTerminal()
		if err != nil {
			return boxdErr{err}
		}
		defer restore()
	}
	if interactive {
		go p.copyStdin(true, false, nil)
	} else {
		p.closeRequest() // the command reads EOF
	}
	res, err := p.receive()
	if err != nil {
		return boxdErr{err}
	}
	if res == nil {
		return boxdErr{fmt.Errorf("exec: boxd ended the stream without a result")}
	}
	// The stream ends right after the result; an error there (boxd failed
	// after the command) outranks the command's exit, as on ExecStream.
	if _, err := p.stream.Receive(); err != nil && !errors.Is(err, io.EOF) {
		return boxdErr{err}
	}
	if stats {
		fmt.Fprintln(os.Stderr, "boxctl: "+usageLine(p.usage))
	}
	return exitWith(res)
}

// usageLine is exec --stats's line: what the command used.
func usageLine(u *boxdv1.ResourceUsage) string {
	if u == nil {
		return "stats: none reported"
	}
	sec := func(usec int64) string { return fmt.Sprintf("%.3fs", float64(usec)/1e6) }
	return fmt.Sprintf("stats: user %s system %s peak_memory %d read_bytes %d write_bytes %d wall %s",
		sec(u.UserCpuUsec), sec(u.SystemCpuUsec), u.PeakMemoryBytes, u.ReadBytes, u.WriteBytes, sec(u.WallUsec))
}

// runExec streams a command's output to boxctl's stdout and stderr and
// returns exitError with the command's code (boxctl run's one command).
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
	return exitWith(res)
}
