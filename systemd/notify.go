// Package systemd holds boxd's systemd integration: readiness notification
// and socket activation, written against the documented protocols
// (sd_notify(3), sd_listen_fds(3)) so boxd needs no libsystemd.
package systemd

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Notify sends state (e.g. "READY=1") to the service manager if boxd runs
// under one with Type=notify. It reports whether a message was sent.
func Notify(state string) (bool, error) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return false, nil
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	return true, nil
}

// listenFdsStart is SD_LISTEN_FDS_START.
const listenFdsStart = 3

// Listeners returns the sockets systemd passed to this process (socket
// activation), or nil when there are none. The environment variables are
// cleared so children do not inherit them.
func Listeners() ([]net.Listener, error) {
	defer os.Unsetenv("LISTEN_PID")
	defer os.Unsetenv("LISTEN_FDS")
	defer os.Unsetenv("LISTEN_FDNAMES")
	pid, err := strconv.Atoi(os.Getenv("LISTEN_PID"))
	if err != nil || pid != os.Getpid() {
		return nil, nil
	}
	n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if err != nil || n <= 0 {
		return nil, nil
	}
	var out []net.Listener
	for fd := listenFdsStart; fd < listenFdsStart+n; fd++ {
		syscall.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), "LISTEN_FD_"+strconv.Itoa(fd))
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("socket activation fd %d: %w", fd, err)
		}
		out = append(out, ln)
	}
	return out, nil
}

// WatchdogInterval returns the interval within which the service manager
// wants WATCHDOG=1 (WATCHDOG_USEC, set with WatchdogSec= in the unit), and
// false if it does not watch this process (no WATCHDOG_USEC, or a
// WATCHDOG_PID that is another process's), as sd_watchdog_enabled(3).
func WatchdogInterval() (time.Duration, bool) {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0, false
	}
	if p := os.Getenv("WATCHDOG_PID"); p != "" {
		if pid, err := strconv.Atoi(p); err != nil || pid != os.Getpid() {
			return 0, false
		}
	}
	return time.Duration(usec) * time.Microsecond, true
}
