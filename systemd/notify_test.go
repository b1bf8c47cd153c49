package systemd

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestNotifySendsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	sent, err := Notify("READY=1")
	if err != nil || !sent {
		t.Fatalf("Notify = %v, %v", sent, err)
	}
	buf := make([]byte, 64)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); got != "READY=1" {
		t.Fatalf("got %q", got)
	}
}

func TestNotifyWithoutManager(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify("READY=1"); sent || err != nil {
		t.Fatalf("Notify without NOTIFY_SOCKET = %v, %v", sent, err)
	}
}

func TestListenersIgnoresOtherPID(t *testing.T) {
	t.Setenv("LISTEN_PID", "1")
	t.Setenv("LISTEN_FDS", "1")
	lns, err := Listeners()
	if err != nil || lns != nil {
		t.Fatalf("Listeners for another pid = %v, %v", lns, err)
	}
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
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	if _, ok := WatchdogInterval(); ok {
		t.Error("no WATCHDOG_USEC: enabled")
	}
}
