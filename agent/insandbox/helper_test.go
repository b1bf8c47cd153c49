//go:build linux

package insandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// The test binary doubles as a boxd-init: re-executed with this variable set
// it runs RunInit, so the PID-1 code path (StartReaper's wait4(-1), the child
// subreaper, SIGTERM handling) runs in a process of its own, where reaping
// every child cannot disturb the test process's os/exec.
const helperEnv = "BOXD_AGENT_TEST_INIT"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		ln, err := Listen(os.Getenv("BOXD_TEST_SOCKET"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cfg := InitConfig{
			Workdir:  os.Getenv("BOXD_TEST_WORKDIR"),
			Listener: ln,
			BaseEnv:  baseEnv(),
			Logf: func(format string, args ...any) {
				fmt.Fprintf(os.Stderr, "test-init: "+format+"\n", args...)
			},
		}
		if os.Getenv("BOXD_TEST_REBIND") == "1" { // as boxd-init under gVisor
			cfg.Rebind = func() (net.Listener, error) { return Listen(os.Getenv("BOXD_TEST_SOCKET")) }
		}
		err = RunInit(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// target is one agent under test, reachable through client (or raw, at
// socket).
type target struct {
	client  *host.Client
	socket  string
	workdir string
	init    *exec.Cmd // nil for the in-process server
}

// baseEnv is what both kinds of target give commands.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "BASE=1", "FOO=old"}
}

// shortTempDir keeps socket paths under the 108 byte sun_path limit, which
// t.TempDir's long names can exceed.
func shortTempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "boxd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func startServer(t testing.TB) *target {
	d := shortTempDir(t)
	wd := filepath.Join(d, "work")
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(filepath.Join(d, "run", wire.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{BaseEnv: baseEnv(), Workdir: wd, Logf: t.Logf}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &target{client: host.NewClient(ln.Addr().String()), socket: ln.Addr().String(), workdir: wd}
}

func startInit(t testing.TB, env ...string) *target {
	d := shortTempDir(t)
	wd := filepath.Join(d, "work") // created by the init
	sock := filepath.Join(d, "run", wire.SocketName)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(baseEnv(), helperEnv+"=1", "BOXD_TEST_WORKDIR="+wd, "BOXD_TEST_SOCKET="+sock), env...)
	var log syncBuffer
	cmd.Stderr = &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("init log:\n%s", log.String())
		}
	})
	c := host.NewClient(sock)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("init never answered: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &target{client: c, socket: sock, workdir: wd, init: cmd}
}

// forEachTarget runs fn against an in-process Server (per-pid reaping) and
// against a subprocess init (reap-all as a child subreaper).
func forEachTarget(t *testing.T, fn func(t *testing.T, tg *target)) {
	t.Run("server", func(t *testing.T) { fn(t, startServer(t)) })
	t.Run("init", func(t *testing.T) { fn(t, startInit(t)) })
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// processGone reports whether pid has exited (gone, or a zombie waiting for
// whoever its parent is now).
func processGone(pid int) bool {
	st, ok := readProcStat(pid)
	return !ok || st.state == 'Z'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer collects a subprocess's stderr while tests read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
