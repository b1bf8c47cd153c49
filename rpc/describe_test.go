//go:build linux

package rpc

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
)

// syncBuffer is a log sink the server writes from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reflection and health are served as boxd serves its API: over gRPC on
// the socket, behind the connection cap, with the caller's credentials
// (a failed call is logged with the caller's pid).
func TestDescribeServices(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	s := &Server{Log: slog.New(slog.NewTextHandler(&logs, nil)), MaxConns: 1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	hc := &http.Client{Transport: apiwire.Transport(sock)}
	health := grpchealth.NewClient(hc, "http://boxd", connect.WithGRPC())
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	for _, svc := range append([]string{""}, APIServices...) {
		r, err := health.Check(cctx, &grpchealth.CheckRequest{Service: svc})
		if err != nil || r.Status != grpchealth.StatusServing {
			t.Errorf("health of %q: %+v %v", svc, r, err)
		}
	}
	if _, err := health.Check(cctx, &grpchealth.CheckRequest{Service: "no.such.Service"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("health of an unknown service: %v, want not_found", err)
	}
	if l := logs.String(); !strings.Contains(l, "grpc.health.v1.Health/Check") || !strings.Contains(l, "peer_pid="+strconv.Itoa(os.Getpid())) {
		t.Errorf("the failed health check is not logged with the caller's credentials:\n%s", l)
	}

	refl := grpcreflect.NewClient(hc, "http://boxd", connect.WithGRPC())
	stream := refl.NewStream(cctx)
	names, err := stream.ListServices()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	got := map[string]bool{}
	for _, n := range names {
		got[string(n)] = true
	}
	for _, want := range append(APIServices, grpchealth.HealthV1ServiceName, grpcreflect.ReflectV1ServiceName) {
		if !got[want] {
			t.Errorf("reflection lists %v, lacks %s", names, want)
		}
	}
	files, err := stream.FileContainingSymbol("boxd.v1.FileService")
	if err != nil || len(files) == 0 || len(files[0].GetService()) == 0 {
		t.Errorf("reflection of boxd.v1.FileService: %v %v", files, err)
	}
	stream.Close()

	// The cap (1) holds: while this client's connection is open, another
	// client's health check is refused resource_exhausted.
	other := grpchealth.NewClient(&http.Client{Transport: apiwire.Transport(sock)}, "http://boxd", connect.WithGRPC())
	if _, err := other.Check(cctx, &grpchealth.CheckRequest{}); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("health over the connection cap: %v, want resource_exhausted", err)
	}
}
