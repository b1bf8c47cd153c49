// Command boxctl-mcp serves boxd over the Model Context Protocol on stdio
// or on streamable HTTP over a Unix socket (--http-socket) or TCP (--http)
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
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxd-dev/boxd/internal/instance"
	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/mcpserver"
	"github.com/boxd-dev/boxd/rpc/apiwire"
)

func main() {
	socket := apiwire.DefaultSocket
	if s := os.Getenv("BOXD_SOCKET"); s != "" {
		socket = s
	}
	flag.StringVar(&socket, "socket", socket, "boxd's Unix socket (env BOXD_SOCKET); wins over --instance")
	inst := flag.String("instance", os.Getenv("BOXD_INSTANCE"), "reach boxd instance NAME at its socket (env BOXD_INSTANCE)")
	dbg := flag.Bool("debug", false, "log every session event to stderr")
	httpSocket := flag.String("http-socket", "", "serve MCP's streamable HTTP transport on this Unix socket instead of stdio")
	var t tcpOptions
	flag.StringVar(&t.addr, "http", "", "serve MCP's streamable HTTP transport on this TCP address (HOST:PORT) instead of stdio; every request needs the bearer token")
	flag.StringVar(&t.tokenFile, "token-file", "", "with --http: read the bearer token from this file (owned by you, mode 0600) instead of generating one")
	flag.StringVar(&t.tokenOut, "token-out", "", "with --http: write the generated bearer token to this file (mode 0600) instead of printing it to stderr")
	flag.StringVar(&t.cert, "tls-cert", "", "with --http: serve HTTPS with this certificate (PEM); needed beyond loopback")
	flag.StringVar(&t.key, "tls-key", "", "with --http: the private key (PEM) of --tls-cert")
	shared := flag.Bool("shared-sessions", false, "with --http or --http-socket: let every session use every sandbox of this user, not only those it created")
	idle := flag.Duration("idle-timeout", 10*time.Minute, "with --http or --http-socket: end a session after this long without a request (0: never)")
	flag.Parse()
	if err := instanceSocket(&socket, *inst); err != nil {
		fmt.Fprintln(os.Stderr, "boxctl mcp:", err)
		os.Exit(2)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "boxctl mcp: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := checkFlags(*httpSocket, t, *shared); err != nil {
		fmt.Fprintln(os.Stderr, "boxctl mcp:", err)
		os.Exit(2)
	}
	if err := useRemote(); err != nil {
		fmt.Fprintln(os.Stderr, "boxctl mcp:", err)
		os.Exit(2)
	}
	level := slog.LevelWarn
	if *dbg {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	o := mcpserver.HTTPOptions{Socket: socket, Version: version(), Log: log, IdleTimeout: *idle, SharedSessions: *shared}
	var err error
	switch {
	case *httpSocket != "":
		err = runHTTP(*httpSocket, o)
	case t.addr != "":
		err = runTCP(t, o)
	default:
		err = run(socket, log)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "boxctl mcp:", err)
		os.Exit(1)
	}
}

// checkFlags refuses flags that do not go together.
func checkFlags(httpSocket string, t tcpOptions, shared bool) error {
	switch {
	case httpSocket != "" && t.addr != "":
		return fmt.Errorf("--http and --http-socket: one transport at a time")
	case shared && httpSocket == "" && t.addr == "":
		return fmt.Errorf("--shared-sessions: only with --http or --http-socket (stdio serves one session)")
	case t.addr == "" && (t.tokenFile != "" || t.tokenOut != "" || t.cert != "" || t.key != ""):
		return fmt.Errorf("--token-file, --token-out, --tls-cert and --tls-key: only with --http")
	case t.tokenFile != "" && t.tokenOut != "":
		return fmt.Errorf("--token-file and --token-out: a token is either read or generated")
	case (t.cert == "") != (t.key == ""):
		return fmt.Errorf("--tls-cert and --tls-key: give both or neither")
	}
	return nil
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

// runHTTP serves streamable HTTP on a Unix socket until SIGINT or SIGTERM;
// the sessions still open then end and their sandboxes are deleted. The
// socket is the user's alone (0600): whoever reaches it acts on boxd as
// this user. Sessions are kept apart (each uses only the sandboxes it
// created) unless shared.
func runHTTP(path string, o mcpserver.HTTPOptions) error {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("--http-socket %s: exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			_ = c.Close()
			return fmt.Errorf("--http-socket %s: another server is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("--http-socket %s: removing the stale socket: %w", path, err)
		}
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return fmt.Errorf("--http-socket: %w", err)
	}
	defer os.Remove(path)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	o.Log.Info("serving MCP over streamable HTTP", "http_socket", path, "socket", o.Socket, "idle_timeout", o.IdleTimeout, "shared_sessions", o.SharedSessions)
	return mcpserver.ServeHTTP(ctx, ln, o)
}

// version is the module version this was built from, for the handshake.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// instanceSocket points socket at instance inst's unless a socket was
// given (--socket or BOXD_SOCKET), as boxctl chooses.
func instanceSocket(socket *string, inst string) error {
	given := os.Getenv("BOXD_SOCKET") != ""
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "socket" })
	if given || inst == "" {
		return nil
	}
	n, err := instance.Derive(inst)
	if err != nil {
		return fmt.Errorf("--instance: %w", err)
	}
	*socket = n.Socket
	return nil
}

// useRemote sends every call to the TCP listener BOXD_HOST names, if one
// is set (boxctl mcp sets it from boxctl's --host and its other flags),
// with BOXD_TOKEN and the BOXD_TLS_* files; the socket is then not used.
func useRemote() error {
	host := os.Getenv(apiwire.HostEnv)
	if host == "" {
		return nil
	}
	return rpcclient.SetRemote(rpcclient.Remote{Host: host, Token: os.Getenv(apiwire.TokenEnv),
		CAFile: os.Getenv(apiwire.TLSCAEnv), CertFile: os.Getenv(apiwire.TLSCertEnv), KeyFile: os.Getenv(apiwire.TLSKeyEnv)})
}
