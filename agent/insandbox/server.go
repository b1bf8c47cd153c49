//go:build linux

// Package insandbox is boxd-init's side of the channel: it runs inside the
// sandbox, as its PID 1, and serves boxd's requests there: commands,
// processes and sessions, file operations and copies, and reaping. It
// works from the sandbox's own view of the world, so no host-side code
// ever resolves a sandbox-controlled path.
package insandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// requestTimeout bounds the wait for a connection's request frame.
const requestTimeout = 30 * time.Second

// Server is the init side of the channel. Each accepted connection carries one
// operation (or, kept, several in turn: wire.Request.Keep) and is handled in
// its own goroutine.
type Server struct {
	BaseEnv []string // environment every exec starts from
	Workdir string   // default working directory, and base for relative paths
	// User is who commands, processes, sessions and file operations run as
	// when the request names nobody (NAME, UID, NAME:GROUP or UID:GID);
	// empty is root.
	User string
	// Logf, if set, receives a line for every operation that fails inside
	// the server (not for commands that merely exit non-zero).
	Logf func(format string, args ...any)

	// dmu guards BaseEnv and Workdir, which set-defaults changes while
	// operations read them.
	dmu sync.RWMutex

	// CanRebind says the init can bind a new agent socket after
	// checkpoint-prepare closed its listener (RunInit's Rebind).
	CanRebind bool

	mu        sync.Mutex
	ck        ckState
	closed    bool
	listeners map[net.Listener]struct{}
	running   map[*child]*reaper
	pidReaper *reaper
}

// Serve accepts connections on ln until ln fails or Close is called, in
// which case it returns nil.
func (s *Server) Serve(ln net.Listener) error {
	if !s.addListener(ln) {
		ln.Close()
		return nil
	}
	defer s.removeListener(ln)
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if s.isParked() {
				return errParked
			}
			// Out of fds or a connection reset before accept: transient,
			// and the init must not die of it.
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
				errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EINTR) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("accept: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("agent: accept: %w", err)
		}
		backoff = 0
		go s.handle(conn)
	}
}

// Close stops all Serve loops and kills every command still running.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	lns := s.listeners
	s.listeners = nil
	running := s.running
	s.running = nil
	s.mu.Unlock()
	for ln := range lns {
		ln.Close()
	}
	for c, r := range running {
		r.kill(c)
	}
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) addListener(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[ln] = struct{}{}
	return true
}

func (s *Server) removeListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.listeners, ln)
}

// track records a running command so Close can kill it. It reports false
// (and the caller must kill the command) if the server is already closed.
func (s *Server) track(c *child, r *reaper) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.running == nil {
		s.running = make(map[*child]*reaper)
	}
	s.running[c] = r
	return true
}

func (s *Server) untrack(c *child) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, c)
}

// reaper returns the process-wide reaper if StartReaper was called, else a
// per-server one that waits only for the server's own children.
func (s *Server) reaper() *reaper {
	if r := processReaper.Load(); r != nil {
		return r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pidReaper == nil {
		s.pidReaper = newPidReaper()
	}
	return s.pidReaper
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

func (s *Server) handle(conn net.Conn) {
	s.trackConn(conn)
	defer s.untrackConn(conn)
	defer conn.Close()
	fr := wire.NewFrameReader(conn)
	fw := wire.NewFrameWriter(conn)
	// A panic here would take down PID 1 and with it the whole sandbox.
	defer func() {
		if p := recover(); p != nil {
			s.logf("panic serving connection: %v\n%s", p, debug.Stack())
			fw.WriteJSON(wire.FrameError, &wire.RemoteError{Message: "internal error in init", Code: wire.CodeInternal})
		}
	}()

	// A connection that never says what it wants must not pin a goroutine
	// and a descriptor in PID 1 forever; nor may a kept one left idle.
	for first := true; ; first = false {
		req, ok := s.readRequest(conn, fr, fw, first)
		if !ok || !s.serve(conn, fr, fw, &req) || !req.Keep || !wire.Keepable(&req) {
			return
		}
	}
}

// readRequest reads a connection's next request. A kept connection that
// goes idle or is closed between requests ends quietly.
func (s *Server) readRequest(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, first bool) (wire.Request, bool) {
	var req wire.Request
	wait := requestTimeout
	if !first {
		wait = wire.KeepIdle
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	f, err := fr.ReadFrame()
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		if err != io.EOF && first {
			s.replyError(fw, "read request", fmt.Errorf("%w: %v", wire.ErrInvalid, err))
		}
		return req, false
	}
	if f.Type != wire.FrameRequest {
		s.replyError(fw, "read request", fmt.Errorf("%w: first frame is %s, want request", wire.ErrInvalid, f.Type))
		return req, false
	}
	if err := json.Unmarshal(f.Payload, &req); err != nil {
		s.replyError(fw, "read request", fmt.Errorf("%w: malformed request: %v", wire.ErrInvalid, err))
		return req, false
	}
	return req, true
}

// replyError sends err as an error frame; the connection ends afterwards.
// The message goes to the host as is (the client adds the operation); op
// is for the init's own log.
func (s *Server) replyError(fw *wire.FrameWriter, op string, err error) {
	s.logf("%s failed: %v", op, err)
	fw.WriteJSON(wire.FrameError, wire.ToRemoteError(err))
}

// resolve validates a path from the host and makes it absolute, relative
// paths being taken from the workdir.
func (s *Server) resolve(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: empty path", wire.ErrInvalid)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: path %q contains NUL", wire.ErrInvalid, p)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.workdir(), p)
	}
	return filepath.Clean(p), nil
}

func (s *Server) workdir() string {
	s.dmu.RLock()
	defer s.dmu.RUnlock()
	if s.Workdir == "" {
		return "/"
	}
	return s.Workdir
}

// shownUser is who a process or session runs as, for its info: the
// request's user, else the sandbox's default, else root (uid 0, whatever
// the sandbox's passwd calls it).
func (s *Server) shownUser(requested string) string {
	switch {
	case requested != "":
		return requested
	case s.User != "":
		return s.User
	}
	return "root"
}
