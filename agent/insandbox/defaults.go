//go:build linux

package insandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/boxd-dev/boxd/agent/wire"
)

// terminate sends SIGTERM to every other process of the sandbox: as PID 1
// of its pid namespace, kill(-1) reaches exactly those. Outside a sandbox
// (tests) it would reach the whole machine, so it refuses.
func (s *Server) terminate(_ net.Conn, _ *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	if os.Getpid() != 1 {
		s.replyError(fw, req.Op, fmt.Errorf("%w: terminate: the init is not PID 1", wire.ErrInvalid))
		return
	}
	if err := syscall.Kill(-1, syscall.SIGTERM); err != nil && err != syscall.ESRCH {
		s.replyError(fw, req.Op, fmt.Errorf("terminate: %w", err))
		return
	}
	fw.WriteFrame(wire.FrameOK, nil)
}

// baseEnv is the environment every command starts from now.
func (s *Server) baseEnv() []string {
	s.dmu.RLock()
	defer s.dmu.RUnlock()
	return s.BaseEnv
}

// setDefaults changes the environment and working directory later
// commands start with (boxctl update), and the default user (a warm-pool
// hand-out). A new working directory is created as the init does at start;
// the user is checked first, so an unknown one changes nothing.
func (s *Server) setDefaults(_ net.Conn, _ *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var d wire.Defaults
	if err := fsDecodeArgs(req, &d); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	for _, kv := range d.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			s.replyError(fw, req.Op, fmt.Errorf("%w: env: %q is not K=V", wire.ErrInvalid, kv))
			return
		}
	}
	if d.User != "" {
		if _, err := lookupExecUser(d.User); err != nil {
			if !errors.Is(err, wire.ErrInvalid) {
				err = fmt.Errorf("%w: %v", wire.ErrInvalid, err) // as at start: any failure refuses the user
			}
			s.replyError(fw, req.Op, fmt.Errorf("default user: %w", err))
			return
		}
	}
	if d.Workdir != "" {
		if !filepath.IsAbs(d.Workdir) || strings.IndexByte(d.Workdir, 0) >= 0 {
			s.replyError(fw, req.Op, fmt.Errorf("%w: workdir: %q is not an absolute path", wire.ErrInvalid, d.Workdir))
			return
		}
		if err := os.MkdirAll(d.Workdir, 0o755); err != nil {
			s.replyError(fw, req.Op, fmt.Errorf("workdir %s: %w", d.Workdir, err))
			return
		}
	}
	s.dmu.Lock()
	if len(d.Env) > 0 {
		s.BaseEnv = mergeEnv(slices.Clip(s.BaseEnv), d.Env)
	}
	if d.Workdir != "" {
		s.Workdir = filepath.Clean(d.Workdir)
	}
	if d.User != "" {
		// Read without the lock elsewhere: boxd sets it only while
		// handing a member out, waiting for this reply before anything
		// else reaches the init.
		s.User = d.User
	}
	s.dmu.Unlock()
	fw.WriteFrame(wire.FrameOK, nil)
}
