//go:build linux

package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the init: re-executed with receiveEnv set to a
// hand-off socket path it calls Receive there, reports what it got on
// stdout and serves one connection on the listener it was given.
const receiveEnv = "HANDOFF_TEST_RECEIVE"

// nobody is the uid the child runs as: not root, like a sandbox's root is
// not host root.
const nobody = 65534

type report struct {
	Err     string `json:"err,omitempty"`
	Workdir string `json:"workdir,omitempty"`
	Env     []string
	Pids    int64
	Cloexec bool
}

func TestMain(m *testing.M) {
	if path := os.Getenv(receiveEnv); path != "" {
		os.Exit(child(path))
	}
	os.Exit(m.Run())
}

func child(path string) int {
	cfg, ln, err := Receive(path, 10*time.Second)
	var r report
	if err != nil {
		r.Err = err.Error()
		json.NewEncoder(os.Stdout).Encode(r)
		return 1
	}
	r.Workdir, r.Env, r.Pids = cfg.Workdir, cfg.Env, cfg.Pids
	r.Cloexec = cloexecOnAll()
	json.NewEncoder(os.Stdout).Encode(r)
	os.Stdout.Close()
	c, err := ln.Accept()
	if err != nil {
		return 2
	}
	fmt.Fprint(c, "served by the child")
	c.Close()
	return 0
}

// cloexecOnAll reports whether every socket descriptor is close-on-exec:
// the received listener must never reach a command. (go test may pass
// other descriptors down, /dev/null for one.)
func cloexecOnAll() bool {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false
	}
	for _, e := range ents {
		var fd int
		link, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && flags&unix.FD_CLOEXEC == 0 {
			return false
		}
	}
	return true
}

// setup makes boxd's side: the agent listener in a root-only directory and
// the hand-off socket, owned by nobody, in a directory others may search.
func setup(t *testing.T) (dir string, agent *os.File, l *Listener) {
	t.Helper()
	dir, err := os.MkdirTemp("", "handoff")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	hdir := filepath.Join(dir, "handoff")
	if err := os.Mkdir(hdir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	agent, err = ListenAgent(filepath.Join(dir, "private", "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	l, err = Listen(filepath.Join(hdir, SocketName), nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	fi, err := os.Stat(filepath.Join(hdir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody || fi.Mode().Perm() != 0o600 {
		t.Fatalf("hand-off socket is %d:%d %v, want %d:%d 0600", st.Uid, st.Gid, fi.Mode().Perm(), nobody, nobody)
	}
	return dir, agent, l
}

// startChild starts the receiving child as uid. Its connection waits in
// the listener's backlog until Offer accepts it.
func startChild(t *testing.T, path string, uid uint32) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	// go test's build directory is private to root: run a copy the child's
	// uid can execute.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(filepath.Dir(path)), "child")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{receiveEnv + "=" + path}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

var testConfig = Config{Workdir: "/workspace", Env: []string{"PATH=/bin", "GODEBUG=x=1"}, Pids: 64}

func TestRightPeerGetsAWorkingListener(t *testing.T) {
	dir, agent, l := setup(t)
	cmd, out := startChild(t, l.path, nobody)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lg logs
	if err := l.Offer(ctx, Peer{Pid: cmd.Process.Pid, UID: nobody}, testConfig, agent, lg.logf); err != nil {
		t.Fatalf("offer: %v; log: %s", err, lg.String())
	}
	// boxd drops its copy: the child's must be enough.
	agent.Close()

	c, err := net.Dial("unix", filepath.Join(dir, "private", "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "served by the child" {
		t.Fatalf("agent socket answered %q, %v", got, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("child report %q: %v", out.String(), err)
	}
	if r.Err != "" || r.Workdir != testConfig.Workdir || r.Pids != testConfig.Pids || strings.Join(r.Env, ",") != "PATH=/bin,GODEBUG=x=1" {
		t.Errorf("child received %+v, want %+v", r, testConfig)
	}
	if !r.Cloexec {
		t.Error("the received listener is not close-on-exec")
	}
	if lg.String() != "" {
		t.Errorf("refusals logged for the right peer: %s", lg.String())
	}
}

// refused checks that Offer gives nothing to a child that is not want and
// keeps waiting, and that the child saw the connection closed unanswered.
// With open, the socket is made connectable by anyone first, so that the
// check in Offer, not the file mode, is what refuses.
func refused(t *testing.T, uid uint32, open bool, want func(childPid int) Peer) {
	dir, agent, l := setup(t)
	if open {
		if err := os.Chmod(l.path, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	cmd, out := startChild(t, l.path, uid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lg logs
	offered := make(chan error, 1)
	go func() { offered <- l.Offer(ctx, want(cmd.Process.Pid), testConfig, agent, lg.logf) }()

	err := cmd.Wait() // the child gives up once refused
	var r report
	if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
		t.Fatalf("child exited %v with report %q", err, out.String())
	}
	if err == nil || r.Err == "" || !strings.Contains(r.Err, "closed without a message") {
		t.Errorf("child was not refused: exit %v, report %+v", err, r)
	}
	select {
	case err := <-offered:
		t.Fatalf("Offer returned %v after a wrong peer; it must keep waiting", err)
	case <-time.After(100 * time.Millisecond):
	}
	if !strings.Contains(lg.String(), "refused peer pid") {
		t.Errorf("refusal not logged: %q", lg.String())
	}
	cancel()
	if err := <-offered; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "refused 1 other peers") {
		t.Errorf("Offer after cancel: %v", err)
	}
	// Nothing answers on the agent socket: the listener never left.
	if agent.Close() != nil {
		t.Error("agent listener already closed")
	}
	if _, err := net.Dial("unix", filepath.Join(dir, "private", "agent.sock")); err == nil {
		t.Error("agent socket still answers after boxd closed the only listener")
	}
}

func TestWrongPidIsRefused(t *testing.T) {
	refused(t, nobody, false, func(pid int) Peer { return Peer{Pid: pid + 1, UID: nobody} })
}

func TestWrongUIDIsRefused(t *testing.T) {
	refused(t, nobody+1, true, func(pid int) Peer { return Peer{Pid: pid, UID: nobody} })
}

// TestOtherUIDCannotConnect: the socket's mode keeps every uid but the
// sandbox root's from connecting at all.
func TestOtherUIDCannotConnect(t *testing.T) {
	_, _, l := setup(t)
	cmd, out := startChild(t, l.path, nobody+1)
	if err := cmd.Wait(); err == nil || !strings.Contains(out.String(), "permission denied") {
		t.Errorf("uid %d connected to a 0600 socket of uid %d: exit %v, report %s", nobody+1, nobody, err, out.String())
	}
}

func TestOfferStopsWithTheContext(t *testing.T) {
	_, agent, l := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Offer(ctx, Peer{Pid: 1, UID: nobody}, testConfig, agent, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Offer with nobody connecting: %v", err)
	}
}

func TestConfigBounds(t *testing.T) {
	big := Config{Env: []string{"A=" + strings.Repeat("x", MaxConfigBytes)}}
	if _, err := big.Encode(); err == nil {
		t.Error("an oversized config was encoded")
	}
	for _, bad := range []string{`{"workdir":"rel"}`, `{"pids":-1}`, `{"env":["NOEQUALS"]}`, `{"env":["=v"]}`, `not json`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) succeeded", bad)
		}
	}
}

func TestListenAgentRefusesANonSocket(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.sock")
	if err := os.Symlink("/run/containerd/containerd.sock", p); err != nil {
		t.Fatal(err)
	}
	if f, err := ListenAgent(p); err == nil {
		f.Close()
		t.Fatal("ListenAgent replaced a symlink")
	}
}

// TestReceivedDescriptorIsCloexec: the descriptor is close-on-exec from the
// moment it arrives, not only after FileListener's copy, so a command
// started meanwhile could not inherit it either.
func TestReceivedDescriptorIsCloexec(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[0])
	f := os.NewFile(uintptr(pair[1]), "recv")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := unix.Sendmsg(pair[0], []byte("x"), unix.UnixRights(int(r.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	_, fd, err := recvFirst(nc.(*net.UnixConn), make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("received descriptor flags %#x (%v): not close-on-exec", flags, err)
	}
}
