//go:build linux

// Command boxd-gateway is a boxd fleet's one endpoint: it speaks boxd's
// API and routes each call by the sandbox it names to that sandbox's node
// (see docs/fleet.md). `boxd-gateway token create` makes the tokens its
// callers present.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
	"github.com/boxd-dev/boxd/internal/fleet/gateway"
	"github.com/boxd-dev/boxd/internal/fleet/nodes"
)

var logger = log.New(os.Stderr, "boxd-gateway: ", log.LstdFlags)

func main() {
	app := &cli.App{
		Name:  "boxd-gateway",
		Usage: "serve boxd's API for a fleet, routing each call to its sandbox's node",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kubeconfig", EnvVars: []string{"KUBECONFIG"}, Usage: "kubeconfig file (default: the pod's in-cluster service account)"},
			&cli.StringFlag{Name: "listen", Value: ":8443", Usage: "ADDR:PORT to serve on (TLS)"},
			&cli.StringFlag{Name: "tls-cert", Usage: "PEM certificate (chain) the gateway serves with"},
			&cli.StringFlag{Name: "tls-key", Usage: "PEM key of --tls-cert"},
			&cli.StringFlag{Name: "tokens", Value: "/var/lib/boxd-gateway/tokens.json", Usage: "the gateway's token file (boxd-gateway token create); read again when it changes"},
			&cli.StringFlag{Name: "node-ca", Usage: "PEM CA of the nodes' boxd serving certificates"},
			&cli.StringFlag{Name: "node-cert", Usage: "PEM client certificate the nodes name in boxd --owner-asserter"},
			&cli.StringFlag{Name: "node-key", Usage: "PEM key of --node-cert"},
			&cli.StringFlag{Name: "node-server-name", Usage: "the name the nodes' serving certificates carry (default: each node's address)"},
		},
		Action:   serve,
		Commands: []*cli.Command{tokenCommand()},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "boxd-gateway:", err)
		os.Exit(1)
	}
}

func serve(cc *cli.Context) error {
	if cc.String("tls-cert") == "" || cc.String("tls-key") == "" {
		return errors.New("--tls-cert and --tls-key are required: tokens never cross a network in the clear")
	}
	pair, err := tls.LoadX509KeyPair(cc.String("tls-cert"), cc.String("tls-key"))
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	nodeTLS, err := nodes.TLSFiles{CA: cc.String("node-ca"), Cert: cc.String("node-cert"), Key: cc.String("node-key"), ServerName: cc.String("node-server-name")}.Config()
	if err != nil {
		return err
	}
	tokens, err := gateway.OpenTokens(cc.String("tokens"))
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	res, err := resolver(ctx, cc)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cc.String("listen"))
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	proto := new(http.Protocols)
	proto.SetHTTP1(true)
	proto.SetHTTP2(true)
	hs := &http.Server{
		Handler:           gateway.New(tokens, nodes.NewPool(nodeTLS), res, logger.Printf),
		Protocols:         proto,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
	go func() {
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = hs.Shutdown(sctx)
	}()
	logger.Printf("serving on %s", ln.Addr())
	if err := hs.Serve(tl); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// resolver starts an informer cache of Sandbox and BoxdNode resources.
func resolver(ctx context.Context, cc *cli.Context) (*gateway.KubeResolver, error) {
	var cfg *rest.Config
	var err error
	if f := cc.String("kubeconfig"); f != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", f)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	if err := fleetv1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cache.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	if err := gateway.IndexSandboxes(ctx, c); err != nil {
		return nil, err
	}
	direct, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	// Informers asked for before the cache starts start with it; a List
	// before Start fails (the cache is not started), so wait for the sync.
	for _, o := range []client.Object{&fleetv1.Sandbox{}, &fleetv1.BoxdNode{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return nil, fmt.Errorf("watch the API server: %w", err)
		}
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			logger.Printf("cache: %v", err)
		}
	}()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("the Sandbox and BoxdNode caches did not sync with the API server")
	}
	return &gateway.KubeResolver{Cache: c, Direct: direct}, nil
}
