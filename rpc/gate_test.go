//go:build linux

package rpc

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func TestSandboxOf(t *testing.T) {
	for _, tc := range []struct {
		m    any
		want string
	}{
		{&boxdv1.ExecRequest{SandboxId: "abc"}, "abc"},
		{&boxdv1.DeleteSandboxRequest{Id: "name1"}, "name1"},
		{&boxdv1.CreateSandboxResponse{Sandbox: &boxdv1.Sandbox{Id: "new"}}, "new"},
		{&boxdv1.CreateSandboxRequest{Name: "x"}, ""},
		{&boxdv1.StartProcessRequest{Spec: &boxdv1.ProcessSpec{SandboxId: "nested"}}, "nested"},
		{nil, ""},
	} {
		if got := sandboxOf(tc.m); got != tc.want {
			t.Errorf("sandboxOf(%T) = %q, want %q", tc.m, got, tc.want)
		}
	}
}

func TestMutating(t *testing.T) {
	for proc, want := range map[string]bool{
		"/boxd.v1.SandboxService/Exec":          true,
		"/boxd.v1.SandboxService/DeleteSandbox": true,
		"/boxd.v1.SandboxService/CopyIn":        true,
		"/boxd.v1.SandboxService/ListSandboxes": false,
		"/boxd.v1.SandboxService/GetSandbox":    false,
		"/boxd.v1.SandboxService/CopyOut":       false,
		"/boxd.v1.FileService/ReadFile":         false,
		"/boxd.v1.FileService/WriteFile":        true,
		"/boxd.v1.SandboxService/SomethingNew":  true, // audited unless named read-only
	} {
		if got := mutating(proc); got != want {
			t.Errorf("mutating(%s) = %v, want %v", proc, got, want)
		}
	}
}

// TestGateDrain: once draining, a new call is unavailable; drain returns
// as soon as the call in flight ends, well before the grace.
func TestGateDrain(t *testing.T) {
	g := newGate(&Server{})
	ctx := context.WithValue(context.Background(), peerKey{}, Peer{UID: 0, PID: 1})
	if err := g.admit(ctx, "/boxd.v1.SandboxService/Exec"); err != nil {
		t.Fatal(err)
	}
	done := make(chan int)
	go func() { done <- g.drain(time.Minute) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := g.admit(ctx, "/boxd.v1.SandboxService/Exec")
		if connect.CodeOf(err) == connect.CodeUnavailable {
			break
		}
		if err == nil {
			g.done()
		}
		if time.Now().After(deadline) {
			t.Fatal("gate never started refusing")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case n := <-done:
		t.Fatalf("drain returned (%d left) while a call was in flight", n)
	case <-time.After(50 * time.Millisecond):
	}
	g.done()
	if n := <-done; n != 0 {
		t.Fatalf("drain left %d calls", n)
	}
}

func TestGateNoPeer(t *testing.T) {
	g := newGate(&Server{})
	if err := g.admit(context.Background(), "/boxd.v1.SandboxService/Exec"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("call without peer credentials: %v", err)
	}
}
