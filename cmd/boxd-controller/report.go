package main

import (
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/boxd-dev/boxd/internal/fleet/reporter"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "keep this node's BoxdNode current from its boxd (run beside boxd, as root)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "node", EnvVars: []string{"NODE_NAME"}, Usage: "the BoxdNode's name: the Kubernetes node's"},
			&cli.StringFlag{Name: "address", Usage: "HOST:PORT of this boxd's TLS listener, as the controller and gateway reach it"},
			&cli.StringFlag{Name: "socket", Value: defaultSocket, Usage: "the boxd's Unix socket"},
			&cli.DurationFlag{Name: "interval", Value: 5 * time.Second, Usage: "how often to report (keep it well under the controller's --node-timeout)"},
		},
		Action: func(cc *cli.Context) error {
			if cc.String("node") == "" || cc.String("address") == "" {
				return fmt.Errorf("report: --node and --address are required")
			}
			cfg, err := restConfig(cc)
			if err != nil {
				return err
			}
			s, err := scheme()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: s})
			if err != nil {
				return err
			}
			r := &reporter.Reporter{Client: c, Node: cc.String("node"), Address: cc.String("address"), Socket: cc.String("socket")}
			ctx, cancel := signalContext()
			defer cancel()
			r.Run(ctx, cc.Duration("interval"), func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) })
			return nil
		},
	}
}
