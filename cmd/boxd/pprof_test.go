//go:build linux

package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

// The profiler is off without BOXD_PPROF_ADDR, refused on an address that
// is not loopback, and served on a loopback one.
func TestPprofLoopbackOnly(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv(pprofEnv, "")
	if err := startPprof(log); err != nil {
		t.Fatalf("unset: %v", err)
	}
	for _, addr := range []string{"0.0.0.0:0", ":0", "localhost:0", "192.0.2.1:0", "nonsense"} {
		t.Setenv(pprofEnv, addr)
		err := startPprof(log)
		if err == nil || !strings.Contains(err.Error(), pprofEnv) {
			t.Errorf("%q: err = %v, want a refusal naming %s", addr, err, pprofEnv)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv(pprofEnv, addr)
	if err := startPprof(log); err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "goroutine profile") {
		t.Errorf("profiler answered %s: %.200s", resp.Status, b)
	}
}
