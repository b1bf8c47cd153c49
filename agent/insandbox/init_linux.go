//go:build linux

package insandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrBadUser is returned by RunInit when the default user cannot be
// resolved in the sandbox.
var ErrBadUser = errors.New("the sandbox's default user is unknown")

// InitConfig configures RunInit.
type InitConfig struct {
	Workdir string // created if missing; default working directory of execs
	// Listener is the agent socket boxd created and handed over; RunInit
	// serves it and closes it on return.
	Listener net.Listener
	BaseEnv  []string // environment of every exec
	User     string   // default user of commands and file operations; empty: root
	Logf     func(format string, args ...any)
	// Rebind, if set, binds a new agent listener (gVisor: the init binds
	// its own). With it the init offers checkpoint-prepare, and binds anew
	// on SIGUSR2 after one (wire.OpCheckpointPrepare).
	Rebind func() (net.Listener, error)
}

// RunInit is the whole life of boxd-init: reap children, serve the agent
// listener, and on SIGTERM or SIGINT kill every process and return nil. When
// not PID 1 (in tests, or under another init) it makes itself a child
// subreaper so that orphans still come to it to be reaped and killed.
func RunInit(cfg InitConfig) error {
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			cfg.Listener.Close()
			return fmt.Errorf("boxd-init: become child subreaper: %w", err)
		}
	}
	// Before anything can start a child, so none is missed.
	StartReaper()
	if err := initOOMScore.setUp(); err != nil && cfg.Logf != nil {
		cfg.Logf("boxd-init: commands keep the init's oom_score_adj: %v", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	if err := os.MkdirAll(cfg.Workdir, 0o755); err != nil {
		cfg.Listener.Close()
		return fmt.Errorf("boxd-init: create workdir: %w", err)
	}
	if cfg.User != "" {
		// A default user the sandbox does not know would fail every
		// command: refuse to start, which fails the create with this
		// message.
		if _, err := lookupExecUser(cfg.User); err != nil {
			cfg.Listener.Close()
			return fmt.Errorf("boxd-init: default %v: %w", err, ErrBadUser)
		}
	}
	srv := &Server{BaseEnv: cfg.BaseEnv, Workdir: cfg.Workdir, User: cfg.User, Logf: cfg.Logf, CanRebind: cfg.Rebind != nil}
	// SIGUSR2 is always handled, so that one from the host never ends the
	// init; it only matters after a checkpoint-prepare.
	rebind := make(chan os.Signal, 1)
	signal.Notify(rebind, syscall.SIGUSR2)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(cfg.Listener) }()
	if cfg.Logf != nil {
		cfg.Logf("boxd-init: serving")
	}
	for {
		select {
		case sig := <-sigs:
			if cfg.Logf != nil {
				cfg.Logf("boxd-init: %v: killing all processes", sig)
			}
			srv.Close()
			killAll()
			return nil
		case <-rebind:
			if cfg.Rebind == nil || !srv.Unpark() {
				continue
			}
			ln, err := cfg.Rebind()
			if err != nil {
				srv.logf("boxd-init: bind a new agent socket: %v", err)
				continue
			}
			go func() { served <- srv.Serve(ln) }()
		case err := <-served:
			if errors.Is(err, errParked) {
				continue
			}
			srv.Close()
			killAll()
			return err
		}
	}
}

// WithRootHome adds root's home directory from the sandbox's /etc/passwd
// ("/" without one) as HOME to env when env has none, as runc does for a
// container's first process: commands got it from the init's environment
// before the init's environment was cut down to nothing.
func WithRootHome(env []string) []string {
	if _, ok := getenv(env, "HOME"); ok {
		return env
	}
	home := "/"
	if u, err := lookupExecUser("0"); err == nil {
		home = u.home
	}
	return append(slices.Clip(env), "HOME="+home)
}

// killAll kills every other process in the sandbox. As PID 1 of a pid
// namespace, kill(-1) reaches exactly the namespace's processes (and the
// kernel would kill them anyway once we exit). Anywhere else kill(-1) would
// hit the whole machine, so only our descendants are killed.
func killAll() {
	if os.Getpid() == 1 {
		syscall.Kill(-1, syscall.SIGKILL)
		return
	}
	killDescendants()
}

// Listen creates an agent socket at path for tests and tools that run a
// Server outside a sandbox: the directory is made 0700 and a stale socket
// from a previous run is removed first. The socket is 0600. (A sandbox's
// init does not listen itself: boxd hands it a listener, see
// agent/handoff.)
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: chmod %s: %w", dir, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agent: listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("agent: chmod socket: %w", err)
	}
	return ln, nil
}
