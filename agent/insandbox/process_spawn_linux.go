//go:build linux

package insandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// procCmd is a process started by the process and session operations, and
// the parent's ends of its stdio.
type procCmd struct {
	child  *child
	reaper *reaper
	stdin  *os.File   // pipe write end or pty master; nil when the child reads EOF
	stdout *os.File   // pipe read end or pty master
	stderr *os.File   // nil with a pty: the terminal carries both streams
	extra  []*os.File // read ends of the child's descriptors 3, 4, ...
	pty    *os.File   // the pty master, or nil
	// escapees: a kill also takes the orphans the command's tree left
	// with the init, for a foreground command boxd has no cgroup for
	// (gVisor), where the session is all the init would find otherwise.
	escapees bool
}

// kill SIGKILLs the command's whole tree (its session), and with escapees
// what left it.
func (c *procCmd) kill() {
	if !c.escapees {
		c.reaper.kill(c.child)
		return
	}
	st, ok := readProcStat(c.child.pid)
	c.reaper.kill(c.child)
	if ok {
		c.reaper.killEscapees(st.start)
	}
}

// closeOutputs closes the read ends, which stops readers even when a
// background process still holds the write ends. With a pty this closes
// stdin too: both are the master.
// outputs are the read ends the command's output arrives on.
func (c *procCmd) outputs() []*os.File {
	return append([]*os.File{c.stdout, c.stderr}, c.extra...)
}

func (c *procCmd) closeOutputs() {
	closeFiles(c.stdout, c.stderr)
	closeFiles(c.extra...)
}

// spawnSpec is a validated, resolved command.
type spawnSpec struct {
	path   string
	args   []string
	env    []string
	dir    string
	user   *execUser // nil: as the init (root)
	tty    bool
	window wire.WindowSize
	stdin  bool // keep a stdin pipe; without it the child reads EOF at once
	extra  int  // output pipes at descriptors 3, 4, ...
	// combined gives stdout and stderr one pipe (as 2>&1), so the order
	// of writes is kept; procCmd.stderr is then nil.
	combined bool
}

// prepareProcess validates spec and resolves everything the child needs.
// A command that cannot be found or run is a *startFailure.
func (s *Server) prepareProcess(spec *wire.ProcessSpec) (*spawnSpec, error) {
	if err := validateExec(&spec.ExecRequest); err != nil {
		return nil, err
	}
	if spec.Window != nil && (spec.Window.Rows > wire.MaxWindowDim || spec.Window.Cols > wire.MaxWindowDim) {
		return nil, fmt.Errorf("%w: window size %dx%d", wire.ErrInvalid, spec.Window.Rows, spec.Window.Cols)
	}
	sp := &spawnSpec{args: spec.Args, tty: spec.Tty, combined: spec.Combined}
	if spec.Window != nil {
		sp.window = *spec.Window
	}
	var err error
	if sp.env, sp.dir, sp.user, err = s.processEnv(spec.User, spec.Env, spec.Dir, spec.Tty); err != nil {
		return nil, err
	}
	sp.path, err = lookPath(spec.Args[0], sp.env)
	if err != nil {
		code := wire.ExitNotFound
		if err == errNotExecutable {
			code = wire.ExitNotExec
		}
		return nil, &startFailure{code: code, err: err}
	}
	return sp, nil
}

// processEnv resolves the user, environment and working directory shared
// by processes and sessions. HOME follows the user, TERM defaults to xterm
// on a terminal; the request's own env wins over both.
func (s *Server) processEnv(user string, env []string, dir string, tty bool) ([]string, string, *execUser, error) {
	var u *execUser
	var defaults []string
	if user == "" {
		user = s.User
	}
	if user != "" {
		var err error
		if u, err = lookupExecUser(user); err != nil {
			return nil, "", nil, err
		}
		defaults = append(defaults, "HOME="+u.home)
	}
	merged := mergeEnv(mergeEnv(s.baseEnv(), defaults), env)
	if _, ok := getenv(merged, "TERM"); tty && !ok {
		merged = append(merged, "TERM=xterm")
	}
	wd := s.workdir()
	if dir != "" {
		var err error
		if wd, err = s.resolve(dir); err != nil {
			return nil, "", nil, err
		}
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		return nil, "", nil, &wire.RemoteError{Message: fmt.Sprintf("working directory %s: no such directory", wd), Code: wire.CodeNotFound}
	}
	return merged, wd, u, nil
}

// spawnProcess starts sp in a new session. Errors are *startFailure for
// commands that cannot be executed, or errors for an error frame.
func (s *Server) spawnProcess(sp *spawnSpec) (_ *procCmd, retErr error) {
	var cmd procCmd
	var childFds []int
	defer func() {
		for _, fd := range childFds {
			unix.Close(fd) // the child has its copies
		}
		if retErr != nil {
			closeFiles(cmd.stdin, cmd.stdout, cmd.stderr)
			closeFiles(cmd.extra...)
		}
	}()
	// A new session detaches the command from any terminal and lets the
	// whole tree be found by session id when it must be killed.
	sys := &syscall.SysProcAttr{Setsid: true}
	if sp.tty {
		master, slave, err := openPty(sp.window)
		if err != nil {
			return nil, err
		}
		cmd.pty, cmd.stdin, cmd.stdout = master, master, master
		childFds = []int{slave}
		if sp.user != nil {
			// As login does: the user owns its terminal, so programs that
			// reopen it by name (ttyname) can.
			if err := unix.Fchown(slave, int(sp.user.uid), -1); err != nil {
				return nil, fmt.Errorf("chown pty: %w", err)
			}
		}
		// The slave becomes the controlling terminal (Ctty is a child fd).
		sys.Setctty, sys.Ctty = true, 0
	} else {
		fds, err := cmd.openPipes(sp)
		childFds = fds
		if err != nil {
			return nil, err
		}
	}
	files := make([]uintptr, 0, 3+sp.extra)
	if sp.tty {
		files = append(files, uintptr(childFds[0]), uintptr(childFds[0]), uintptr(childFds[0]))
	} else {
		for _, fd := range childFds {
			files = append(files, uintptr(fd))
		}
	}
	if sp.user != nil {
		sys.Credential = sp.user.credential()
	}
	attr := &syscall.ProcAttr{Dir: sp.dir, Env: sp.env, Files: files, Sys: sys}
	cmd.reaper = s.reaper()
	var err error
	cmd.child, err = cmd.reaper.spawn(func() (int, error) {
		return initOOMScore.fork(func() (int, error) { return syscall.ForkExec(sp.path, sp.args, attr) })
	})
	if err != nil {
		if code, ok := startFailureCode(err); ok {
			return nil, &startFailure{code: code, err: err}
		}
		var errno syscall.Errno
		if sp.user != nil && errors.As(err, &errno) && errno == syscall.EINVAL {
			return nil, fmt.Errorf("%w: cannot run as uid %d gid %d (outside the sandbox's user namespace?): %v", wire.ErrInvalid, sp.user.uid, sp.user.gid, err)
		}
		return nil, err
	}
	return &cmd, nil
}

// openPipes makes the command's stdio and extra output pipes and returns
// the child's ends, in descriptor order (those made so far on an error).
func (c *procCmd) openPipes(sp *spawnSpec) ([]int, error) {
	var childFds []int
	f, fd, err := newPipe(false, !sp.stdin)
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	c.stdin, childFds = f, append(childFds, fd)
	if c.stdout, fd, err = newPipe(true, false); err != nil {
		return childFds, fmt.Errorf("stdout pipe: %w", err)
	}
	childFds = append(childFds, fd)
	if sp.combined {
		fd, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	} else {
		c.stderr, fd, err = newPipe(true, false)
	}
	if err != nil {
		return childFds, fmt.Errorf("stderr pipe: %w", err)
	}
	childFds = append(childFds, fd)
	for range sp.extra {
		if f, fd, err = newPipe(true, false); err != nil {
			return childFds, fmt.Errorf("pipe: %w", err)
		}
		c.extra, childFds = append(c.extra, f), append(childFds, fd)
	}
	return childFds, nil
}
