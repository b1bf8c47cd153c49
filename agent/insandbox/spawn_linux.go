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

// command is a started process and the parent's ends of its stdio pipes.
type command struct {
	child  *child
	reaper *reaper
	stdin  *os.File // nil when the command gets no input
	stdout *os.File
	stderr *os.File
}

// kill SIGKILLs the command's whole tree.
func (c *command) kill() { c.reaper.kill(c.child) }

// startFailure is a command that could not be started for reasons a shell
// reports with an exit code (126, 127) rather than as an error.
type startFailure struct {
	code int
	err  error
}

func (f *startFailure) Error() string { return f.err.Error() }

// start validates req, resolves the command and starts it in a new session
// with piped stdio. Errors are *startFailure or errors for an error frame.
func (s *Server) start(req *wire.ExecRequest) (*command, error) {
	if err := validateExec(req); err != nil {
		return nil, err
	}
	env, dir, user, err := s.processEnv(req.User, req.Env, req.Dir, false)
	if err != nil {
		return nil, err
	}
	path, err := lookPath(req.Args[0], env)
	if err != nil {
		code := wire.ExitNotFound
		if err == errNotExecutable {
			code = wire.ExitNotExec
		}
		return nil, &startFailure{code: code, err: err}
	}

	var cmd command
	var childFds [3]int
	// Stdin is a pipe even when empty: no dependence on /dev/null existing.
	noStdin := len(req.Stdin) == 0 && !req.StdinStream
	if cmd.stdin, childFds[0], err = newPipe(false, noStdin); err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	if cmd.stdout, childFds[1], err = newPipe(true, false); err != nil {
		closeFiles(cmd.stdin)
		unix.Close(childFds[0])
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if req.Combined {
		// One pipe for both, as 2>&1: the order of writes is kept.
		if childFds[2], err = unix.FcntlInt(uintptr(childFds[1]), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			closeFiles(cmd.stdin, cmd.stdout)
			unix.Close(childFds[0])
			unix.Close(childFds[1])
			return nil, fmt.Errorf("stderr pipe: %w", err)
		}
	} else if cmd.stderr, childFds[2], err = newPipe(true, false); err != nil {
		closeFiles(cmd.stdin, cmd.stdout)
		unix.Close(childFds[0])
		unix.Close(childFds[1])
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{uintptr(childFds[0]), uintptr(childFds[1]), uintptr(childFds[2])},
		// A new session detaches the command from any terminal and lets
		// the whole tree be found by session id when it must be killed.
		Sys: &syscall.SysProcAttr{Setsid: true},
	}
	if user != nil {
		attr.Sys.Credential = user.credential()
	}
	cmd.reaper = s.reaper()
	cmd.child, err = cmd.reaper.spawn(func() (int, error) { return syscall.ForkExec(path, req.Args, attr) })
	for _, fd := range childFds {
		unix.Close(fd) // the child has its copies
	}
	if err != nil {
		closeFiles(cmd.stdin, cmd.stdout, cmd.stderr)
		if code, ok := startFailureCode(err); ok {
			return nil, &startFailure{code: code, err: err}
		}
		var errno syscall.Errno
		if user != nil && errors.As(err, &errno) && errno == syscall.EINVAL {
			return nil, fmt.Errorf("%w: cannot run as uid %d gid %d (outside the sandbox's user namespace?): %v", wire.ErrInvalid, user.uid, user.gid, err)
		}
		return nil, err
	}
	return &cmd, nil
}

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
