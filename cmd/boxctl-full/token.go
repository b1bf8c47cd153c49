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
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// tokenCommand is `boxctl token`: the bearer tokens of boxd's TCP
// listeners (docs/remote.md).
func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "bearer tokens for boxd's TCP listeners (boxd --listen)",
		Subcommands: []*cli.Command{
			{
				Name: "create", Usage: "make a token and print it (the only time it is shown)", ArgsUsage: "NAME",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "owner", Usage: "host user the token acts as (default: you; others: admins only)"},
					&cli.StringFlag{Name: "scope", Value: "write", Usage: "read, exec, write, admin or metrics"},
					&cli.StringFlag{Name: "ttl", Value: "30d", Usage: "how long the token is valid (30d, 12h, 90m)"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fmt.Errorf("usage: boxctl token create NAME [--owner USER] [--scope read|exec|write|admin|metrics] [--ttl 30d]")
					}
					resp, err := rpcclient.NewTokens(c.String("socket")).CreateToken(c.Context, connect.NewRequest(&boxdv1.CreateTokenRequest{
						Name: c.Args().First(), Owner: c.String("owner"), Scope: c.String("scope"), Ttl: c.String("ttl")}))
					if err != nil {
						return boxdErr{err}
					}
					fmt.Println(resp.Msg.Secret)
					return nil
				},
			},
			{
				Name: "ls", Usage: "list tokens (yours; an admin's: all)", Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *cli.Context) error {
					resp, err := rpcclient.NewTokens(c.String("socket")).ListTokens(c.Context, connect.NewRequest(&boxdv1.ListTokensRequest{}))
					if err != nil {
						return boxdErr{err}
					}
					if c.Bool("json") {
						return printJSONArray(resp.Msg.Tokens)
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tOWNER\tSCOPE\tEXPIRES\tLAST USED")
					for _, t := range resp.Msg.Tokens {
						owner := t.Owner
						if owner == "" {
							owner = fmt.Sprint(t.OwnerUid)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, owner, t.Scope, unixTime(t.Expires), unixTime(t.LastUsed))
					}
					return tw.Flush()
				},
			},
			{
				Name: "rm", Usage: "revoke a token: its next call is refused", ArgsUsage: "NAME",
				Flags: []cli.Flag{&cli.StringFlag{Name: "owner", Usage: "the token's owner (default: you; others: admins only)"}},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fmt.Errorf("usage: boxctl token rm NAME [--owner USER]")
					}
					_, err := rpcclient.NewTokens(c.String("socket")).DeleteToken(c.Context, connect.NewRequest(&boxdv1.DeleteTokenRequest{
						Name: c.Args().First(), Owner: c.String("owner")}))
					if err != nil {
						return boxdErr{err}
					}
					return nil
				},
			},
		},
	}
}

func unixTime(s int64) string {
	if s == 0 {
		return "-"
	}
	return time.Unix(s, 0).UTC().Format(time.RFC3339)
}

// remoteFlags point boxctl at a TCP listener of boxd's instead of the
// socket.
func remoteFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "host", EnvVars: []string{apiwire.HostEnv}, Usage: "reach boxd at https://HOST:PORT (boxd --listen) instead of its socket; needs a token"},
		&cli.StringFlag{Name: "token-file", Usage: "with --host: file holding the bearer token (else " + apiwire.TokenEnv + ")"},
		&cli.StringFlag{Name: "tls-ca", EnvVars: []string{apiwire.TLSCAEnv}, Usage: "with --host: PEM file of the CA that signed boxd's certificate (default: the system's CAs)"},
		&cli.StringFlag{Name: "tls-cert", EnvVars: []string{apiwire.TLSCertEnv}, Usage: "with --host: PEM client certificate, for a boxd that requires one (--client-ca); it names the caller when no token is given"},
		&cli.StringFlag{Name: "tls-key", EnvVars: []string{apiwire.TLSKeyEnv}, Usage: "with --host: PEM key of --tls-cert"},
	}
}

// remoteOf reads the global flags that name a TCP listener; c is the
// application's context (a command's own flags may share these names:
// mcp's --token-file and --tls-cert are its HTTP server's).
func remoteOf(c *cli.Context) (rpcclient.Remote, error) {
	r := rpcclient.Remote{Host: c.String("host"), Token: os.Getenv(apiwire.TokenEnv),
		CAFile: c.String("tls-ca"), CertFile: c.String("tls-cert"), KeyFile: c.String("tls-key")}
	if r.Host == "" {
		if c.String("token-file") != "" || r.CAFile != "" || r.CertFile != "" || r.KeyFile != "" {
			return r, fmt.Errorf("--token-file, --tls-ca, --tls-cert and --tls-key go with --host (or %s)", apiwire.HostEnv)
		}
		return r, nil
	}
	if f := c.String("token-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return r, fmt.Errorf("--token-file: %w", err)
		}
		r.Token = strings.TrimSpace(string(b))
	}
	return r, nil
}

// remoteSet is what the global flags named, kept by useRemote for
// commands that hand it on (mcp).
var remoteSet rpcclient.Remote

// useRemote sends every call to --host if one is set. It runs before any
// command, with the application's own context.
func useRemote(c *cli.Context) error {
	r, err := remoteOf(c)
	if err != nil || r.Host == "" {
		return err
	}
	remoteSet = r
	return rpcclient.SetRemote(r)
}
