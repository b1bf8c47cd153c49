package systemd

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listenUnixgram is a service manager's notify socket.
func listenUnixgram(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func readState(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotifySendsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn := listenUnixgram(t, path)
	t.Setenv("NOTIFY_SOCKET", path)
	for _, state := range []string{"READY=1", "WATCHDOG=1", "STOPPING=1"} {
		sent, err := Notify(state)
		if err != nil || !sent {
			t.Fatalf("Notify(%s) = %v, %v", state, sent, err)
		}
		if got := readState(t, conn); got != state {
			t.Fatalf("got %q, want %q", got, state)
		}
	}
	// The socket stays set for the pings that follow READY=1.
	if os.Getenv("NOTIFY_SOCKET") != path {
		t.Error("Notify cleared NOTIFY_SOCKET")
	}
}

// systemd gives an abstract socket as "@name".
func TestNotifyAbstractSocket(t *testing.T) {
	name := "boxd-notify-test-" + strconv.Itoa(os.Getpid())
	conn := listenUnixgram(t, "@"+name)
	t.Setenv("NOTIFY_SOCKET", "@"+name)
	if sent, err := Notify("READY=1"); err != nil || !sent {
		t.Fatalf("Notify = %v, %v", sent, err)
	}
	if got := readState(t, conn); got != "READY=1" {
		t.Fatalf("got %q", got)
	}
}

func TestNotifyWithoutManager(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify("READY=1"); sent || err != nil {
		t.Fatalf("Notify without NOTIFY_SOCKET = %v, %v", sent, err)
	}
}

func TestNotifyMissingSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone.sock"))
	sent, err := Notify("READY=1")
	if sent || err == nil || !strings.HasPrefix(err.Error(), "sd_notify: ") {
		t.Fatalf("Notify to a missing socket = %v, %v; want an sd_notify error", sent, err)
	}
}

func TestListenersIgnoresOtherPID(t *testing.T) {
	t.Setenv("LISTEN_PID", "1")
	t.Setenv("LISTEN_FDS", "1")
	lns, err := Listeners()
	if err != nil || lns != nil {
		t.Fatalf("Listeners for another pid = %v, %v", lns, err)
	}
	if _, ok := os.LookupEnv("LISTEN_FDS"); ok {
		t.Error("LISTEN_FDS left for children")
	}
}

func TestListenersBadCount(t *testing.T) {
	for _, n := range []string{"-1", "0", "x", ""} {
		t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
		t.Setenv("LISTEN_FDS", n)
		if lns, err := Listeners(); err != nil || lns != nil {
			t.Errorf("LISTEN_FDS=%q: %v, %v", n, lns, err)
		}
	}
}

// TestListenersActivated runs this test binary again as systemd would run
// boxd: a listening socket as fd 3, LISTEN_PID the child's own pid. The
// child serves one connection on what Listeners returned.
func TestListenersActivated(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "activated.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	out := runActivated(t, f)
	f.Close()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || line != "served\n" {
		t.Fatalf("from the activated socket: %q %v\n%s", line, err, out())
	}
}

// A passed fd that is not a listening socket is an error naming it.
func TestListenersNotASocket(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	out := runActivated(t, f)
	f.Close()
	if got := out(); !strings.Contains(got, "error: socket activation fd 3: ") {
		t.Fatalf("child: %s", got)
	}
}

// runActivated starts the helper child with fd as its fd 3; out waits for
// it and returns what it printed.
func runActivated(t *testing.T, fd *os.File) (out func() string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestActivatedChild$", "-test.v")
	cmd.Env = append(os.Environ(), "BOXD_TEST_ACTIVATED=1")
	cmd.ExtraFiles = []*os.File{fd}
	var b strings.Builder
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return func() string { _ = cmd.Wait(); return b.String() }
}

// TestActivatedChild is the child of runActivated; it does nothing in a
// normal run.
func TestActivatedChild(t *testing.T) {
	if os.Getenv("BOXD_TEST_ACTIVATED") != "1" {
		return
	}
	os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	os.Setenv("LISTEN_FDS", "1")
	lns, err := Listeners()
	if err != nil {
		t.Log("error: " + err.Error())
		return
	}
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		if _, ok := os.LookupEnv(k); ok {
			t.Fatalf("%s left for children", k)
		}
	}
	if len(lns) != 1 {
		t.Fatalf("%d listeners", len(lns))
	}
	conn, err := lns[0].Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("served\n"))
}

func TestWatchdogInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "2000000")
	t.Setenv("WATCHDOG_PID", "")
	if d, ok := WatchdogInterval(); !ok || d != 2*time.Second {
		t.Errorf("WATCHDOG_USEC=2000000: %v %v", d, ok)
	}
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	if _, ok := WatchdogInterval(); !ok {
		t.Error("our own WATCHDOG_PID: not enabled")
	}
	t.Setenv("WATCHDOG_PID", "1")
	if _, ok := WatchdogInterval(); ok {
		t.Error("another process's WATCHDOG_PID: enabled")
	}
	t.Setenv("WATCHDOG_PID", "x")
	if _, ok := WatchdogInterval(); ok {
		t.Error("a WATCHDOG_PID that is no pid: enabled")
	}
	t.Setenv("WATCHDOG_PID", "")
	for _, usec := range []string{"", "0", "-5", "x", "1.5"} {
		t.Setenv("WATCHDOG_USEC", usec)
		if _, ok := WatchdogInterval(); ok {
			t.Errorf("WATCHDOG_USEC=%q: enabled", usec)
		}
	}
	// The variables stay for the pings.
	if _, ok := os.LookupEnv("WATCHDOG_USEC"); !ok {
		t.Error("WatchdogInterval cleared WATCHDOG_USEC")
	}
}
