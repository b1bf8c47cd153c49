package main

import (
	"fmt"
	"time"

	"github.com/go-logr/stdr"
	"github.com/urfave/cli/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/boxd-dev/boxd/internal/fleet/controller"
	"github.com/boxd-dev/boxd/internal/fleet/nodes"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "reconcile Sandbox resources (leader-elected when --leader-elect)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "node-ca", Usage: "PEM CA of the nodes' boxd serving certificates"},
			&cli.StringFlag{Name: "node-cert", Usage: "PEM client certificate the nodes name in boxd --owner-asserter"},
			&cli.StringFlag{Name: "node-key", Usage: "PEM key of --node-cert"},
			&cli.StringFlag{Name: "node-server-name", Usage: "the name the nodes' serving certificates carry (default: each node's address)"},
			&cli.DurationFlag{Name: "node-timeout", Value: 15 * time.Second, Usage: "a node that has not reported for this long has its sandboxes Lost"},
			&cli.DurationFlag{Name: "resync", Value: 10 * time.Second, Usage: "how often each sandbox is checked on its node"},
			&cli.IntFlag{Name: "sample", Value: 2, Usage: "placement samples this many reporting nodes and takes the one with the most free memory"},
			&cli.StringFlag{Name: "gateway-address", Usage: "the gateway's address, written to each Sandbox's status.address"},
			&cli.BoolFlag{Name: "leader-elect", Usage: "run only while holding the Lease boxd-controller (for more than one replica)"},
			&cli.StringFlag{Name: "leader-election-namespace", Usage: "namespace of the Lease (default: the pod's)"},
			&cli.StringFlag{Name: "health-addr", Value: ":8081", Usage: "serve /healthz and /readyz here (\"0\": not at all)"},
		},
		Action: run,
	}
}

func run(cc *cli.Context) error {
	cfg, err := restConfig(cc)
	if err != nil {
		return err
	}
	tlsCfg, err := nodes.TLSFiles{CA: cc.String("node-ca"), Cert: cc.String("node-cert"), Key: cc.String("node-key"), ServerName: cc.String("node-server-name")}.Config()
	if err != nil {
		return err
	}
	s, err := scheme()
	if err != nil {
		return err
	}
	ctrl.SetLogger(stdr.New(logger))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  s,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  cc.String("health-addr"),
		LeaderElection:          cc.Bool("leader-elect"),
		LeaderElectionID:        "boxd-controller",
		LeaderElectionNamespace: cc.String("leader-election-namespace"),
	})
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}
	if cc.String("health-addr") != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return err
		}
	}
	opts := controller.Options{NodeTimeout: cc.Duration("node-timeout"), Resync: cc.Duration("resync"),
		K: cc.Int("sample"), Gateway: cc.String("gateway-address")}
	if err := controller.Setup(mgr, nodes.NewPool(tlsCfg), opts); err != nil {
		return err
	}
	ctx, cancel := signalContext()
	defer cancel()
	return mgr.Start(ctx)
}
