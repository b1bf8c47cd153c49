//go:build linux

package main

// The transport's own floor: a ConnectRPC server with no boxd code in it
// (connect-go's standard health handler behind Go's HTTP/2 server, with
// boxd's HTTP/2 settings, on a Unix socket), run as a process of its own
// like boxd. A call that does nothing there is what any call to boxd pays
// before boxd's code runs: the exec-floor row sets boxd's part next to it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"connectrpc.com/grpchealth"

	rpcclient "github.com/boxd-dev/boxd/rpc/client"
)

// bareConnectArg runs boxbench as the bare server: boxbench bare-connect SOCKET.
const bareConnectArg = "bare-connect"

// serveBareConnect serves the health service on the Unix socket at path
// until killed.
func serveBareConnect(path string) error {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(grpchealth.NewHandler(grpchealth.NewStaticChecker()))
	proto := new(http.Protocols)
	proto.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: proto, HTTP2: &http.HTTP2Config{
		MaxReadFrameSize:              rpcclient.MaxFrameBytes,
		MaxReceiveBufferPerStream:     rpcclient.StreamWindowBytes,
		MaxReceiveBufferPerConnection: rpcclient.ConnWindowBytes,
	}}
	return srv.Serve(ln)
}

// bareConnect is a running bare server and a health client of it, with
// the transport and protocol boxd's Go client uses.
type bareConnect struct {
	cmd    *exec.Cmd
	health *grpchealth.Client
}

func startBareConnect(ctx context.Context, dir string) (*bareConnect, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "bare-connect.sock")
	cmd := exec.Command(self, bareConnectArg, sock)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bare ConnectRPC server: %w", err)
	}
	b := &bareConnect{cmd: cmd, health: grpchealth.NewClient(&http.Client{Transport: rpcclient.Transport(sock)}, "http://bare")}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err = b.health.Check(ctx, &grpchealth.CheckRequest{}); err == nil {
			return b, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.stop()
			return nil, errors.Join(fmt.Errorf("bare ConnectRPC server never answered"), err)
		}
	}
}

func (b *bareConnect) stop() {
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
}
