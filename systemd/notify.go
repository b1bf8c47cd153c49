// Package systemd holds boxd's systemd integration: readiness and watchdog
// notification (sd_notify(3)) and socket activation (sd_listen_fds(3)),
// through coreos/go-systemd so boxd needs no libsystemd. It keeps boxd's
// own small surface over the library: errors carry context, a socket that
// is not a listener is an error rather than a nil listener, and the
// watchdog is simply off when its variables do not apply to this process.
package systemd

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
)

// Notify sends state (e.g. "READY=1") to the service manager if boxd runs
// under one with Type=notify. It reports whether a message was sent.
// NOTIFY_SOCKET stays set: the watchdog pings and STOPPING=1 use it later.
func Notify(state string) (bool, error) {
	sent, err := daemon.SdNotify(false, state)
	if err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	return sent, nil
}

// listenFdsStart is SD_LISTEN_FDS_START, the first passed socket's fd.
const listenFdsStart = 3

// Listeners returns the sockets systemd passed to this process (socket
// activation), or nil when there are none. The environment variables are
// cleared so children do not inherit them.
func Listeners() ([]net.Listener, error) {
	// activation.Files sizes its slice by LISTEN_FDS and would panic on a
	// negative count; a count that is not positive means no sockets.
	if n, err := strconv.Atoi(os.Getenv("LISTEN_FDS")); err == nil && n < 0 {
		os.Unsetenv("LISTEN_PID")
		os.Unsetenv("LISTEN_FDS")
		os.Unsetenv("LISTEN_FDNAMES")
		return nil, nil
	}
	files := activation.Files(true)
	if len(files) == 0 {
		return nil, nil
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	// activation.Listeners leaves a nil listener for a socket it cannot
	// use; boxd would only find out when serving on it.
	out := make([]net.Listener, 0, len(files))
	for i, f := range files {
		ln, err := net.FileListener(f)
		if err != nil {
			for _, l := range out {
				l.Close()
			}
			return nil, fmt.Errorf("socket activation fd %d: %w", listenFdsStart+i, err)
		}
		out = append(out, ln)
	}
	return out, nil
}

// WatchdogInterval returns the interval within which the service manager
// wants WATCHDOG=1 (WATCHDOG_USEC, set with WatchdogSec= in the unit), and
// false if it does not watch this process (no WATCHDOG_USEC, one that is
// not a positive number, or a WATCHDOG_PID that is another process's), as
// sd_watchdog_enabled(3).
func WatchdogInterval() (time.Duration, bool) {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}
