//go:build linux

package insandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// startFailure is a command that could not be started for reasons a shell
// reports with an exit code (126, 127) rather than as an error.
type startFailure struct {
	code int
	err  error
}

func (f *startFailure) Error() string { return f.err.Error() }

func validateExec(req *wire.ExecRequest) error {
	if len(req.Args) == 0 || req.Args[0] == "" {
		return fmt.Errorf("%w: empty command", wire.ErrInvalid)
	}
	if req.Timeout < 0 || req.OutputLimit < 0 {
		return fmt.Errorf("%w: negative timeout or output limit", wire.ErrInvalid)
	}
	for _, list := range [][]string{req.Args, req.Env, {req.Dir}} {
		for _, s := range list {
			if strings.IndexByte(s, 0) >= 0 {
				return fmt.Errorf("%w: NUL byte in %q", wire.ErrInvalid, s)
			}
		}
	}
	return nil
}

// startFailureCode maps an execve failure to the exit code a shell would
// report, or false if the failure is not about the command (e.g. fork ran
// out of pids), which is reported as an error instead.
func startFailureCode(err error) (int, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return 0, false
	}
	switch errno {
	case syscall.ENOENT, syscall.ENOTDIR:
		return wire.ExitNotFound, true
	case syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.EISDIR,
		syscall.ETXTBSY, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.E2BIG, syscall.ELIBBAD:
		return wire.ExitNotExec, true
	}
	return 0, false
}

// startFailed reports a command that could not be started the way a shell
// does: a message on stderr and exit code 126 or 127.
func (s *Server) startFailed(fw *wire.FrameWriter, name string, f *startFailure, started time.Time) {
	msg := fmt.Sprintf("boxd: exec %q: %v\n", name, f.err)
	if fw.WriteFrame(wire.FrameStderr, []byte(msg)) != nil {
		return
	}
	fw.WriteJSON(wire.FrameResult, wire.ExecResult{ExitCode: f.code, Started: started, Ended: time.Now()})
}

// newPipe makes a pipe whose child end is a plain blocking descriptor, for
// ForkExec, and whose parent end is an *os.File on Go's poller, so a blocked
// Read or Write on it ends when it is closed. With discard the parent end
// is closed at once (nil is returned for it): the child reads EOF.
func newPipe(parentReads, discard bool) (*os.File, int, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, err
	}
	parent, child := p[1], p[0]
	if parentReads {
		parent, child = p[0], p[1]
	}
	if discard {
		unix.Close(parent)
		return nil, child, nil
	}
	if err := unix.SetNonblock(parent, true); err != nil {
		unix.Close(parent)
		unix.Close(child)
		return nil, -1, err
	}
	return os.NewFile(uintptr(parent), "pipe"), child, nil
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
