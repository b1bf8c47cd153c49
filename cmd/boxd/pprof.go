//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	goruntime "runtime"
	"time"
)

// pprofEnv names a loopback address (127.0.0.1:PORT) on which boxd serves
// Go's profiler endpoints (/debug/pprof/...), with block and mutex
// profiling on. A measuring aid for the bench (BENCH_PROFILE, bench/README)
// and developers, not a flag: it is off unless the environment asks, and
// refused on any address but loopback, since it exposes the daemon's
// internals to whoever can connect.
const pprofEnv = "BOXD_PPROF_ADDR"

// startPprof serves the profiler if pprofEnv is set.
func startPprof(log *slog.Logger) error {
	addr := os.Getenv(pprofEnv)
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", pprofEnv, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s: %q is not a loopback address", pprofEnv, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", pprofEnv, err)
	}
	goruntime.SetBlockProfileRate(int(10 * time.Microsecond)) // blocking events of 10 µs and more
	goruntime.SetMutexProfileFraction(5)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Warn("serving Go profiler endpoints (measuring aid)", "address", ln.Addr().String(), "env", pprofEnv)
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}
