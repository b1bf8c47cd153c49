package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// readValue reads a secret's value from standard input (one trailing
// newline dropped), so it never shows in argv or the shell's history.
func readValue() (string, error) {
	b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read the value from standard input: %w", err)
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if v == "" {
		return "", errors.New("value: empty; give it on standard input")
	}
	return v, nil
}

// secretCommand is `boxctl secret`: credentials brokered at egress.
func secretCommand() *cli.Command {
	return &cli.Command{
		Name:  "secret",
		Usage: "secrets brokered at egress: sandboxes hold placeholders (create --secret NAME[=ENVVAR])",
		Subcommands: []*cli.Command{
			{
				Name: "create", Usage: "store a secret, its value read from standard input", ArgsUsage: "NAME",
				Flags: []cli.Flag{
					&cli.StringSliceFlag{Name: "host", Usage: "a DNS name the value may go to, repeatable (at least one)"},
					&cli.StringFlag{Name: "header", Usage: "the request header the placeholder is replaced in (default Authorization)"},
					&cli.StringFlag{Name: "format", Usage: "the header's whole value, {} standing for the secret, e.g. 'Bearer {}'"},
					&cli.BoolFlag{Name: "allow-http", Usage: "replace the placeholder in plain HTTP requests too"},
					&cli.PathFlag{Name: "upstream-ca", Usage: "PEM file of CAs to trust, besides the host's store, for the secret's hosts"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return errors.New("usage: boxctl secret create NAME --host HOST [--host ...] [--header H] [--format F] < value")
					}
					var ca []byte
					if p := c.Path("upstream-ca"); p != "" {
						var err error
						if ca, err = os.ReadFile(p); err != nil {
							return fmt.Errorf("--upstream-ca: %w", err)
						}
					}
					value, err := readValue()
					if err != nil {
						return err
					}
					resp, err := rpcclient.NewSecrets(c.String("socket")).CreateSecret(c.Context, connect.NewRequest(&boxdv1.CreateSecretRequest{
						Name: c.Args().First(), Value: value, Hosts: c.StringSlice("host"), Header: c.String("header"),
						Format: c.String("format"), AllowHttp: c.Bool("allow-http"), UpstreamCa: string(ca)}))
					if err != nil {
						return boxdErr{err}
					}
					fmt.Println(resp.Msg.Secret.Name)
					return nil
				},
			},
			{
				Name: "ls", Usage: "list secrets: names and hosts, never values", Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
				Action: func(c *cli.Context) error {
					resp, err := rpcclient.NewSecrets(c.String("socket")).ListSecrets(c.Context, connect.NewRequest(&boxdv1.ListSecretsRequest{}))
					if err != nil {
						return boxdErr{err}
					}
					if c.Bool("json") {
						return printJSONArray(resp.Msg.Secrets)
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tOWNER\tHOSTS\tHEADER\tUPDATED")
					for _, s := range resp.Msg.Secrets {
						fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", s.Name, s.OwnerUid, strings.Join(s.Hosts, ","), s.Header, s.UpdatedAt)
					}
					return tw.Flush()
				},
			},
			{
				Name: "rotate", Usage: "replace a secret's value, read from standard input", ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return errors.New("usage: boxctl secret rotate NAME < value")
					}
					value, err := readValue()
					if err != nil {
						return err
					}
					_, err = rpcclient.NewSecrets(c.String("socket")).RotateSecret(c.Context, connect.NewRequest(&boxdv1.RotateSecretRequest{
						Name: c.Args().First(), Value: value}))
					if err != nil {
						return boxdErr{err}
					}
					return nil
				},
			},
			{
				Name: "rm", Usage: "delete a secret (placeholders of it then go out unreplaced)", ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return errors.New("usage: boxctl secret rm NAME")
					}
					_, err := rpcclient.NewSecrets(c.String("socket")).RemoveSecret(c.Context, connect.NewRequest(&boxdv1.RemoveSecretRequest{Name: c.Args().First()}))
					if err != nil {
						return boxdErr{err}
					}
					return nil
				},
			},
		},
	}
}
