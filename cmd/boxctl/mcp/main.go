// Command boxctl-mcp serves boxd over the Model Context Protocol on stdio
// (package mcpserver). Users run it as `boxctl mcp`, which hands over to
// this binary installed next to boxctl: the MCP SDK's package
// initialisation (JSON schema, gob, oauth2) would add ~6 ms to every
// other command of boxctl-full, and only a long-lived MCP session needs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxd-dev/boxd/mcpserver"
	rpcclient "github.com/boxd-dev/boxd/rpc/client"
)

func main() {
	socket := rpcclient.DefaultSocket
	if s := os.Getenv("BOXD_SOCKET"); s != "" {
		socket = s
	}
	flag.StringVar(&socket, "socket", socket, "boxd's Unix socket (env BOXD_SOCKET)")
	dbg := flag.Bool("debug", false, "log every session event to stderr")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "boxctl mcp: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	level := slog.LevelWarn
	if *dbg {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := run(socket, log); err != nil {
		fmt.Fprintln(os.Stderr, "boxctl mcp:", err)
		os.Exit(1)
	}
}

// run serves one session; SIGINT and SIGTERM end it as the end of stdin
// does, with the session's sandboxes cleaned up.
func run(socket string, log *slog.Logger) error {
	srv, err := mcpserver.New(socket, log)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info("serving MCP on stdio", "session", srv.Session(), "socket", socket)
	return srv.Run(ctx, &mcp.StdioTransport{}, version())
}

// version is the module version this was built from, for the handshake.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
