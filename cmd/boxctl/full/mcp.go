package main

import (
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/mcpserver"
)

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve boxd to an AI agent over the Model Context Protocol on stdin/stdout",
		Description: "Tools: sandbox_create, sandbox_list, sandbox_delete, exec, read_file, write_file, list_files, edit_file,\n" +
			"process_start, process_read, process_kill, process_list.\n" +
			"Sandboxes the client creates are labelled " + mcpserver.SessionLabel + "=<session> and deleted when the\n" +
			"client closes stdin (or boxctl gets SIGINT or SIGTERM), unless created with keep=true.\n" +
			"Logs go to stderr; stdout carries the protocol.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "debug", Usage: "log every session event to stderr"},
		},
		Action: func(c *cli.Context) error {
			level := slog.LevelWarn
			if c.Bool("debug") {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			srv, err := mcpserver.New(c.String("socket"), log)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			log.Info("serving MCP on stdio", "session", srv.Session(), "socket", c.String("socket"))
			return srv.Run(ctx, &mcp.StdioTransport{}, version())
		},
	}
}

// version is the module version boxctl was built from, for the MCP
// handshake.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}
