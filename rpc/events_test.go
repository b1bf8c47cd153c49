//go:build linux

package rpc

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestEventsFollowStartsAtOnce: a follower with nothing to replay gets its
// stream at once (not when the first event comes) and then the events.
func TestEventsFollowStartsAtOnce(t *testing.T) {
	dir := t.TempDir()
	evlog, err := events.Open(events.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer evlog.Close()
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Log: slog.New(slog.DiscardHandler), Events: evlog}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	t0 := time.Now()
	stream, err := rpcclient.NewEvents(sock).Events(cctx, connect.NewRequest(&boxdv1.EventsRequest{Follow: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("the call took %v to return", d)
	}
	if !stream.Receive() || !stream.Msg().Live {
		t.Fatalf("no live marker: %v", stream.Err())
	}
	evlog.Emit(events.Created, "abc", 0, nil)
	if !stream.Receive() || stream.Msg().Event.GetType() != events.Created {
		t.Fatalf("no event: %v", stream.Err())
	}
}
