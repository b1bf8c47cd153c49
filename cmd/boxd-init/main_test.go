//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent"
)

// The test binary re-executes itself as the init, so main itself runs.
func TestMain(m *testing.M) {
	if os.Getenv("BOXD_INIT_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestInitBinary(t *testing.T) {
	dir, err := os.MkdirTemp("", "boxd-init")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=/root",
		"BOXD_INIT_TEST_RUN_MAIN=1", "BOXD_CHANNEL_DIR=" + filepath.Join(dir, "run"), "BOXD_WORKDIR=" + work,
	}
	var log bytes.Buffer
	cmd.Stderr = &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	c := agent.NewClient(filepath.Join(dir, "run", agent.SocketName))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for c.Ping(ctx) != nil {
		if ctx.Err() != nil {
			t.Fatalf("init never became ready; log:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for p, mode := range map[string]os.FileMode{filepath.Join(dir, "run"): os.ModeDir | 0o700, filepath.Join(dir, "run", agent.SocketName): os.ModeSocket | 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", p, fi.Mode(), mode, err)
		}
	}

	var out bytes.Buffer
	res, err := c.Exec(ctx, agent.ExecRequest{Args: []string{"sh", "-c", "pwd; env | sort"}}, nil, &out, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if !strings.HasPrefix(out.String(), work+"\n") || !strings.Contains(out.String(), "HOME=/root\n") || strings.Contains(out.String(), "BOXD_") {
		t.Fatalf("workdir or environment wrong:\n%s", out.String())
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("init exited with %v; log:\n%s", err, log.String())
	}
}
