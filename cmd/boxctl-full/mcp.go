package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/rpc/apiwire"
)

// mcpName is the MCP server's binary (source cmd/boxctl-mcp), installed
// next to boxctl-full. It is a binary of its own because the MCP SDK's
// package initialisation would slow every other command of this one (so
// this file does not import package mcpserver either).
const mcpName = "boxctl-mcp"

func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve boxd to an AI agent over the Model Context Protocol on stdin/stdout (or HTTP on a Unix socket or TCP)",
		Description: "Tools: sandbox_create, sandbox_list, sandbox_delete, exec, read_file, write_file, list_files, edit_file,\n" +
			"process_start, process_read, process_kill, process_list, sandbox_diff, run_code.\n" +
			"Sandboxes the client creates are labelled mcp-session=<session> and deleted when the\n" +
			"client closes stdin (or boxctl gets SIGINT or SIGTERM), unless created with keep=true.\n" +
			"With --http-socket PATH it serves MCP's streamable HTTP transport on that Unix socket (mode 0600)\n" +
			"instead: every MCP session gets its own label, and its sandboxes are deleted when the session\n" +
			"ends (the client's DELETE, --idle-timeout without a request, or boxctl mcp stopping). All sessions\n" +
			"act on boxd as this user, so each may use only the sandboxes it created (another's answers\n" +
			"not_found, like a missing id) unless --shared-sessions lets them share this user's sandboxes.\n" +
			"With --http HOST:PORT it serves the same on TCP: every request needs Authorization: Bearer TOKEN\n" +
			"(generated and printed to stderr once, or written to --token-out, or read from --token-file, which\n" +
			"must be yours and mode 0600), a browser's request from another origin gets 403, and an address\n" +
			"beyond loopback needs --tls-cert and --tls-key.\n" +
			"Logs go to stderr; stdout carries the protocol. Served by " + mcpName + ", installed next to boxctl.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "debug", Usage: "log every session event to stderr"},
			&cli.StringFlag{Name: "http-socket", Usage: "serve streamable HTTP on this Unix socket instead of stdio"},
			&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on this TCP address (HOST:PORT) instead of stdio; every request needs the bearer token"},
			&cli.StringFlag{Name: "token-file", Usage: "with --http: read the bearer token from this file (yours, mode 0600) instead of generating one"},
			&cli.StringFlag{Name: "token-out", Usage: "with --http: write the generated bearer token to this file (mode 0600) instead of printing it to stderr"},
			&cli.StringFlag{Name: "tls-cert", Usage: "with --http: serve HTTPS with this certificate (PEM); needed beyond loopback"},
			&cli.StringFlag{Name: "tls-key", Usage: "with --http: the private key (PEM) of --tls-cert"},
			&cli.BoolFlag{Name: "shared-sessions", Usage: "with --http or --http-socket: let every session use every sandbox of this user, not only those it created"},
			&cli.DurationFlag{Name: "idle-timeout", Value: 10 * time.Minute, Usage: "with --http or --http-socket: end a session after this long without a request (0: never)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("usage: boxctl mcp [--debug] [--http-socket PATH | --http HOST:PORT [--token-file F | --token-out F] [--tls-cert F --tls-key F]] [--idle-timeout D] [--shared-sessions]")
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find %s: %w", mcpName, err)
			}
			path := filepath.Join(filepath.Dir(self), mcpName)
			args := []string{path, "--socket", c.String("socket")}
			if c.Bool("debug") {
				args = append(args, "--debug")
			}
			// boxctl-mcp checks which flags go together.
			for _, f := range []string{"http-socket", "http", "token-file", "token-out", "tls-cert", "tls-key"} {
				if v := c.String(f); v != "" {
					args = append(args, "--"+f, v)
				}
			}
			if c.IsSet("idle-timeout") || c.String("http-socket") != "" || c.String("http") != "" {
				args = append(args, "--idle-timeout", c.Duration("idle-timeout").String())
			}
			if c.Bool("shared-sessions") {
				args = append(args, "--shared-sessions")
			}
			// Replace this process: the MCP client's stdio, signals and
			// wait belong to the server itself.
			err = syscall.Exec(path, args, mcpEnv())
			return fmt.Errorf("cannot run %s (install it next to boxctl): %w", path, err)
		},
	}
}

// mcpEnv is boxctl-mcp's environment: boxctl's, with the remote listener
// the global flags named (--host and the rest; useRemote kept them) spelled as the variables
// boxctl-mcp reads, so the server calls the same boxd this command would.
func mcpEnv() []string {
	r := remoteSet
	set := map[string]string{apiwire.HostEnv: r.Host, apiwire.TokenEnv: r.Token,
		apiwire.TLSCAEnv: r.CAFile, apiwire.TLSCertEnv: r.CertFile, apiwire.TLSKeyEnv: r.KeyFile}
	var env []string
	for _, kv := range os.Environ() {
		// The inherited values go: the first of two would win.
		if k, _, _ := strings.Cut(kv, "="); !mapHas(set, k) {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func mapHas(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
