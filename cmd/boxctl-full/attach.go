package main

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func attachCommand() *cli.Command {
	return &cli.Command{
		Name:  "attach",
		Usage: "print a background process's buffered output, then follow it; exits with its exit code",
		Description: "The init keeps the last 1 MiB of each output stream of a background process, also\n" +
			"across boxd restarts. Leaving attach (ctrl-c, or ctrl-p ctrl-q on a terminal) leaves\n" +
			"the process running.",
		ArgsUsage: "ID PROC",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "pass boxctl's stdin to the process (needs exec -di or -dt); EOF closes it"},
			&cli.BoolFlag{Name: "no-follow", Usage: "print the buffered output and return; exit 0 if the process still runs"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return fmt.Errorf("usage: boxctl attach [-i] [--no-follow] ID PROC")
			}
			ctx, cancel := context.WithCancel(c.Context)
			defer cancel()
			interactive := c.Bool("interactive")
			p := &procConn{stream: processClient(c).Attach(ctx)}
			err := p.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Attach{Attach: &boxdv1.AttachRequest{
				SandboxId: c.Args().Get(0), ProcessId: c.Args().Get(1), Stdin: interactive, NoFollow: c.Bool("no-follow"),
			}}})
			if err != nil {
				return boxdErr{err}
			}
			first, err := p.stream.Receive()
			if err != nil {
				return boxdErr{err}
			}
			info := first.GetProcess()
			if info == nil {
				return boxdErr{fmt.Errorf("attach: boxd did not describe the process")}
			}
			detached := make(chan struct{})
			raw := info.Tty && interactive && isTerminal(os.Stdin)
			if raw {
				restore, err := p.rawTerminal()
				if err != nil {
					return boxdErr{err}
				}
				defer restore()
				if ws := windowSize(); ws != nil {
					_ = p.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Resize{Resize: ws}})
				}
			}
			if interactive {
				// On a terminal EOF is not the end of input; elsewhere it
				// closes the process's stdin, as with exec -i.
				go p.copyStdin(!info.Tty, raw, detached)
			}
			type received struct {
				res *boxdv1.ExecResult
				err error
			}
			done := make(chan received, 1)
			go func() {
				res, err := p.receive()
				done <- received{res, err}
			}()
			select {
			case <-detached:
				return nil
			case r := <-done:
				if r.err != nil {
					return boxdErr{r.err}
				}
				if r.res == nil {
					return nil // --no-follow on a running process
				}
				return exitWith(r.res)
			}
		},
	}
}
