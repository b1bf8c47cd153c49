//go:build linux

package insandbox

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// defaultWindow is the size of a terminal whose client gave none.
var defaultWindow = wire.WindowSize{Rows: 24, Cols: 80}

// openPty allocates a pseudo-terminal. The master comes back as an *os.File
// on Go's poller (reads and writes end when it is closed); the slave is a
// plain descriptor for the child. A read from the master fails with EIO
// once no process holds the slave any more: see ptyEOF.
func openPty(ws wire.WindowSize) (master *os.File, slave int, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	fail := func(err error) (*os.File, int, error) {
		unix.Close(m)
		return nil, -1, err
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return fail(fmt.Errorf("unlock pty: %w", err))
	}
	// TIOCGPTPEER opens the slave through the master, so no path lookup in
	// /dev/pts can be raced; older kernels need the path.
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	slave = int(sfd)
	if errno != 0 {
		n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
		if err != nil {
			return fail(fmt.Errorf("pty number: %w", err))
		}
		slave, err = unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("open pty slave: %w", err))
		}
	}
	if ws.Rows == 0 || ws.Cols == 0 {
		ws = defaultWindow
	}
	if err := unix.IoctlSetWinsize(m, unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols}); err != nil {
		unix.Close(slave)
		return fail(fmt.Errorf("set window size: %w", err))
	}
	if err := unix.SetNonblock(m, true); err != nil {
		unix.Close(slave)
		return fail(err)
	}
	return os.NewFile(uintptr(m), "ptmx"), slave, nil
}

// resizePty sets the window size; the kernel sends SIGWINCH to the
// terminal's foreground process group.
func resizePty(master *os.File, ws wire.WindowSize) error {
	if ws.Rows == 0 || ws.Cols == 0 || ws.Rows > wire.MaxWindowDim || ws.Cols > wire.MaxWindowDim {
		return fmt.Errorf("%w: window size %dx%d", wire.ErrInvalid, ws.Rows, ws.Cols)
	}
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
	}); err != nil {
		return err
	}
	return ierr
}
