// Command boxctl drives boxd over its Unix socket.
package main

import (
	"errors"
	"fmt"
	"os"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/instance"
	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// exitError carries a process exit code out of a command (exec's child code).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitBoxdError is boxctl's exit code when boxd refused or failed a request
// in exec and run, so scripts can tell it from the command's own codes (as
// docker exec and docker run use 125).
const ExitBoxdError = 125

func main() {
	app := &cli.App{
		Name:  "boxctl",
		Usage: "create sandboxes, run commands and move files through boxd",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "socket", Value: apiwire.DefaultSocket, EnvVars: []string{"BOXD_SOCKET"}, Usage: "boxd's Unix socket (wins over --instance)"},
			&cli.StringFlag{Name: "instance", EnvVars: []string{"BOXD_INSTANCE"}, Usage: "reach boxd instance NAME (boxd --instance NAME) at its socket"},
		}, remoteFlags()...),
		Before: func(c *cli.Context) error {
			if err := instanceSocket(c); err != nil {
				return err
			}
			return useRemote(c)
		},
		Commands:        commands(),
		HideHelpCommand: true,
	}
	err := app.Run(flagsFirst(app, os.Args))
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	default:
		fmt.Fprintln(os.Stderr, "boxctl:", describe(err))
		var bad boxdErr
		if errors.As(err, &bad) {
			os.Exit(ExitBoxdError)
		}
		os.Exit(1)
	}
}

// commands are boxctl's commands.
func commands() []*cli.Command {
	return []*cli.Command{
		imageCommand(), createCommand(), execCommand(), runCommand(), cpCommand(),
		lsCommand(), inspectCommand(), rmCommand(), updateCommand(), stopCommand(), startCommand(),
		psCommand(), killCommand(), waitCommand(), attachCommand(), sessionCommand(),
		filesCommand(), portCommand(), networkCommand(), mcpCommand(), commitCommand(), forkCommand(), buildCommand(),
		pauseCommand(), unpauseCommand(), statsCommand(), eventsCommand(), poolCommand(), volumeCommand(), secretCommand(), tokenCommand(),
		diffCommand(),
		runCodeCommand(),
		checkpointCommand(), restoreCommand(),
	}
}

// instanceSocket points --socket at --instance's socket unless a socket
// was given (flag or BOXD_SOCKET). The front binary chooses the same way.
func instanceSocket(c *cli.Context) error {
	if c.IsSet("socket") || !c.IsSet("instance") {
		return nil
	}
	n, err := instance.Derive(c.String("instance"))
	if err != nil {
		return fmt.Errorf("--instance: %w", err)
	}
	return c.Set("socket", n.Socket)
}

// boxdErr marks an error from boxd in commands whose own exit codes belong
// to the user's command.
type boxdErr struct{ error }

func (e boxdErr) Unwrap() error { return e.error }

func describe(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("%s: %s", ce.Code(), ce.Message())
	}
	return err.Error()
}

func apiClient(c *cli.Context) boxdv1connect.SandboxServiceClient {
	return rpcclient.New(c.String("socket"))
}
