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

	"github.com/boxd-dev/boxd/agent/handoff"
	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// The test binary re-executes itself as the init, so main itself runs.
func TestMain(m *testing.M) {
	if os.Getenv("BOXD_INIT_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestInitBinary plays boxd: it makes the agent listener and the hand-off
// socket, starts the init with an environment full of variables that would
// steer it, and checks that commands get exactly the handed-off settings.
func TestInitBinary(t *testing.T) {
	dir, err := os.MkdirTemp("", "boxd-init")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	agentPath := filepath.Join(dir, wire.SocketName)
	agentLn, err := handoff.ListenAgent(agentPath)
	if err != nil {
		t.Fatal(err)
	}
	defer agentLn.Close()
	hs, err := handoff.Listen(filepath.Join(dir, handoff.SocketName), os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()

	cmd := exec.Command(os.Args[0], "--handoff", filepath.Join(dir, handoff.SocketName))
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "BOXD_INIT_TEST_RUN_MAIN=1", "INIT_ENV_ONLY=1",
		"BOXD_WORKDIR=/nowhere", "GOMAXPROCS=7", "GOTRACEBACK=crash",
	}
	var log bytes.Buffer
	cmd.Stderr = &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hc := handoff.Config{Workdir: work, Env: []string{"PATH=/usr/bin:/bin", "GODEBUG=for-commands", "MINE=1"}, Pids: 30}
	if err := hs.Offer(ctx, handoff.Peer{Pid: cmd.Process.Pid, UID: uint32(os.Getuid())}, hc, agentLn, t.Logf); err != nil {
		t.Fatalf("hand-off: %v; log:\n%s", err, log.String())
	}
	agentLn.Close()

	c := host.NewClient(agentPath)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("init never became ready: %v; log:\n%s", err, log.String())
	}
	var out bytes.Buffer
	res, err := c.Exec(ctx, wire.ExecRequest{Args: []string{"sh", "-c", "pwd; env | sort"}}, nil, &out, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{work, "GODEBUG=for-commands", "HOME=/root", "MINE=1", "PATH=/usr/bin:/bin", "PWD=" + work}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("workdir and environment of a command:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("init exited with %v; log:\n%s", err, log.String())
	}
	// The init is gone and so is the only listener: the socket file stays
	// and refuses.
	if err := c.Ping(ctx); err == nil {
		t.Error("agent socket answers after the init exited")
	}
}
