// Command boxd-controller is a boxd fleet's control plane on Kubernetes:
// `boxd-controller run` reconciles Sandbox resources onto the nodes'
// boxds (see docs/fleet.md), and `boxd-controller report`, beside each
// node's boxd, keeps that node's BoxdNode current.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
	"github.com/boxd-dev/boxd/rpc/apiwire"
)

func main() {
	app := &cli.App{
		Name:  "boxd-controller",
		Usage: "reconcile a boxd fleet's Sandbox resources onto its nodes",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kubeconfig", EnvVars: []string{"KUBECONFIG"}, Usage: "kubeconfig file (default: the pod's in-cluster service account)"},
		},
		Commands: []*cli.Command{runCommand(), reportCommand()},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "boxd-controller:", err)
		os.Exit(1)
	}
}

// restConfig is the API server's: --kubeconfig, else in-cluster.
func restConfig(cc *cli.Context) (*rest.Config, error) {
	if f := cc.String("kubeconfig"); f != "" {
		return clientcmd.BuildConfigFromFlags("", f)
	}
	return rest.InClusterConfig()
}

func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, fleetv1.AddToScheme(s)
}

// signalContext ends on SIGTERM or SIGINT.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

var logger = log.New(os.Stderr, "boxd-controller: ", log.LstdFlags)

var defaultSocket = apiwire.DefaultSocket
