//go:build linux

package main

// BENCH_PROFILE=DIR: boxd runs with --debug (the adoption's phase timings
// are debug lines in boxd.log) and serves Go's profiler on loopback
// (BOXD_PPROF_ADDR, cmd/boxd/pprof.go); the pool scenario takes a CPU
// profile over its burst and the block, mutex and goroutine profiles
// right after, into DIR (read them with `go tool pprof BOXD DIR/cpu.pb.gz`).
// boxd.log is copied there too. A measuring aid: profiling slows boxd
// down a little, so figures from such a run are not the bench's.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

func profileDir() string { return os.Getenv("BENCH_PROFILE") }

// withProfiler makes cmd (boxd) serve the profiler, with BENCH_PROFILE.
func (e *env) withProfiler(cmd *exec.Cmd) error {
	if profileDir() == "" {
		return nil
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	e.pprofAddr = addr
	cmd.Args = append(cmd.Args, "--debug")
	cmd.Env = append(os.Environ(), "BOXD_PPROF_ADDR="+addr)
	return nil
}

// profiled runs f while boxd's CPU profile is taken (for d, which should
// cover f), then saves the block, mutex and goroutine profiles as they
// stand, all under prefix in BENCH_PROFILE's directory. Without
// BENCH_PROFILE it just runs f.
func (e *env) profiled(ctx context.Context, prefix string, d time.Duration, f func() error) error {
	dir := profileDir()
	if dir == "" || e.pprofAddr == "" {
		return f()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("BENCH_PROFILE: %w", err)
	}
	fetch := func(name, path string) error {
		resp, err := http.Get("http://" + e.pprofAddr + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		out, err := os.Create(filepath.Join(dir, prefix+"-"+name))
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, resp.Body)
		return err
	}
	// Counts since start: reset what came before by taking a delta over
	// the same window as the CPU profile.
	secs := int(d.Seconds() + 0.999)
	errc := make(chan error, 3)
	go func() { errc <- fetch("cpu.pb.gz", fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs)) }()
	go func() { errc <- fetch("block.pb.gz", fmt.Sprintf("/debug/pprof/block?seconds=%d", secs)) }()
	go func() { errc <- fetch("mutex.pb.gz", fmt.Sprintf("/debug/pprof/mutex?seconds=%d", secs)) }()
	time.Sleep(100 * time.Millisecond) // the profiles are running
	ferr := f()
	for range 3 {
		if err := <-errc; err != nil {
			logf("BENCH_PROFILE: %v", err)
		}
	}
	if err := fetch("goroutine.txt", "/debug/pprof/goroutine?debug=1"); err != nil {
		logf("BENCH_PROFILE: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(e.dir, "boxd.log")); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "boxd.log"), b, 0o644)
	}
	logf("BENCH_PROFILE: profiles of %s in %s", prefix, dir)
	return ferr
}
