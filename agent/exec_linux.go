//go:build linux

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// exitGrace is how long output is still collected after the command exits.
// A background child that inherited stdout would otherwise hold the exec
// open for as long as it lives.
const exitGrace = 100 * time.Millisecond

// hangupPoll is how often a blocked stdin writer checks whether the host has
// gone away; while it is blocked nobody else is reading the connection.
const hangupPoll = 200 * time.Millisecond

var chunkPool = sync.Pool{New: func() any { return new([dataChunk]byte) }}

// execution is the state of one exec while it runs.
type execution struct {
	req  *ExecRequest
	conn net.Conn
	fr   *FrameReader
	fw   *FrameWriter

	outMu     sync.Mutex
	outLeft   int64 // bytes of output still allowed
	truncated bool

	broken   atomic.Bool   // a frame write failed: the host is gone
	hangup   chan struct{} // closed when the host goes away
	hangOnce sync.Once
	finished chan struct{} // closed when the exec is over
}

func (s *Server) exec(conn net.Conn, fr *FrameReader, fw *FrameWriter, req *ExecRequest) {
	name := ""
	if len(req.Args) > 0 {
		name = req.Args[0]
	}
	op := fmt.Sprintf("exec %q", name)
	if err := validateExec(req); err != nil {
		s.replyError(fw, op, err)
		return
	}
	env := mergeEnv(s.BaseEnv, req.Env)
	dir := s.workdir()
	if req.Dir != "" {
		var err error
		if dir, err = s.resolve(req.Dir); err != nil {
			s.replyError(fw, op, err)
			return
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		s.replyError(fw, op, &RemoteError{
			Message: fmt.Sprintf("working directory %s: no such directory", dir),
			Code:    CodeNotFound,
		})
		return
	}

	started := time.Now()
	path, err := lookPath(name, env)
	if err != nil {
		code := ExitNotFound
		if err == errNotExecutable {
			code = ExitNotExec
		}
		s.startFailed(fw, name, err, code, started)
		return
	}

	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		s.replyError(fw, op, fmt.Errorf("stdin pipe: %w", err))
		return
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW)
		s.replyError(fw, op, fmt.Errorf("stdout pipe: %w", err))
		return
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW)
		s.replyError(fw, op, fmt.Errorf("stderr pipe: %w", err))
		return
	}
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{stdinR.Fd(), stdoutW.Fd(), stderrW.Fd()},
		// A new session detaches the command from any terminal and lets
		// the whole tree be found by session id when it must be killed.
		Sys: &syscall.SysProcAttr{Setsid: true},
	}
	r := s.reaper()
	c, err := r.spawn(func() (int, error) { return syscall.ForkExec(path, req.Args, attr) })
	closeAll(stdinR, stdoutW, stderrW) // the child has its copies
	if err != nil {
		closeAll(stdinW, stdoutR, stderrR)
		if code, ok := startFailureCode(err); ok {
			s.startFailed(fw, name, err, code, started)
		} else {
			s.replyError(fw, op, err)
		}
		return
	}
	if !s.track(c, r) {
		r.kill(c)
	}
	defer s.untrack(c)

	limit := req.OutputLimit
	if limit == 0 {
		limit = DefaultOutputLimit
	}
	e := &execution{
		req: req, conn: conn, fr: fr, fw: fw,
		outLeft:  limit,
		hangup:   make(chan struct{}),
		finished: make(chan struct{}),
	}
	defer close(e.finished)

	stdinCh := make(chan []byte, 2)
	go e.writeStdin(stdinW, stdinCh)
	go e.readInput(stdinCh)
	defer stdinW.Close() // unblocks a write to a command that stopped reading

	var pumps sync.WaitGroup
	pumps.Add(2)
	go e.pump(stdoutR, FrameStdout, &pumps)
	go e.pump(stderrR, FrameStderr, &pumps)

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	hangup := e.hangup
	var timedOut, abandoned bool
	for waiting := true; waiting; {
		select {
		case <-c.done:
			waiting = false
		case <-timeout:
			timedOut, timeout = true, nil
			r.kill(c)
		case <-hangup:
			abandoned, hangup = true, nil
			r.kill(c)
		}
	}
	ended := time.Now()

	pumpsDone := make(chan struct{})
	go func() { pumps.Wait(); close(pumpsDone) }()
	grace := time.NewTimer(exitGrace)
	select {
	case <-pumpsDone:
	case <-grace.C:
	}
	grace.Stop()
	// Closing the read ends ends the pumps even if a background process
	// still holds the write ends; wait so no output frame follows the result.
	closeAll(stdoutR, stderrR)
	<-pumpsDone

	if abandoned || e.broken.Load() {
		return
	}
	res := ExecResult{
		Started:   started,
		Ended:     ended,
		Truncated: e.truncated,
		UserCPU:   time.Duration(c.rusage.Utime.Nano()),
		SystemCPU: time.Duration(c.rusage.Stime.Nano()),
		MaxRSS:    c.rusage.Maxrss * 1024,
	}
	switch ws := c.status; {
	case c.lost:
		res.ExitCode = -1
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.ExitCode = 128 + int(ws.Signal())
		res.Signal = unix.SignalName(ws.Signal())
	}
	if timedOut {
		res.ExitCode, res.TimedOut = ExitTimeout, true
	}
	if err := fw.WriteJSON(FrameResult, res); err != nil {
		s.logf("%s: send result: %v", op, err)
	}
}

func validateExec(req *ExecRequest) error {
	if len(req.Args) == 0 || req.Args[0] == "" {
		return fmt.Errorf("%w: empty command", errInvalid)
	}
	if req.Timeout < 0 || req.OutputLimit < 0 {
		return fmt.Errorf("%w: negative timeout or output limit", errInvalid)
	}
	for _, list := range [][]string{req.Args, req.Env, {req.Dir}} {
		for _, s := range list {
			if strings.IndexByte(s, 0) >= 0 {
				return fmt.Errorf("%w: NUL byte in %q", errInvalid, s)
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
		return ExitNotFound, true
	case syscall.EACCES, syscall.EPERM, syscall.ENOEXEC, syscall.EISDIR,
		syscall.ETXTBSY, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.E2BIG, syscall.ELIBBAD:
		return ExitNotExec, true
	}
	return 0, false
}

// startFailed reports a command that could not be started the way a shell
// does: a message on stderr and exit code 126 or 127.
func (s *Server) startFailed(fw *FrameWriter, name string, err error, code int, started time.Time) {
	msg := fmt.Sprintf("boxd: exec %q: %v\n", name, err)
	if fw.WriteFrame(FrameStderr, []byte(msg)) != nil {
		return
	}
	fw.WriteJSON(FrameResult, ExecResult{ExitCode: code, Started: started, Ended: time.Now()})
}

// readInput owns the connection's read side during an exec: it forwards
// stdin and notices the host going away.
func (e *execution) readInput(stdin chan<- []byte) {
	open := true
	closeStdin := func() {
		if open {
			close(stdin)
			open = false
		}
	}
	defer closeStdin()
	if len(e.req.Stdin) > 0 && !e.send(stdin, e.req.Stdin) {
		return
	}
	if !e.req.StdinStream {
		closeStdin()
	}
	for {
		f, err := e.fr.ReadFrame()
		if err != nil {
			e.hangUp() // EOF: the host closed or cancelled
			return
		}
		switch {
		case f.Type == FrameStdin && open:
			if !e.send(stdin, bytes.Clone(f.Payload)) {
				return
			}
		case f.Type == FrameStdinClose && open:
			closeStdin()
		default:
			// A confused host: stop as if it had gone.
			e.hangUp()
			return
		}
	}
}

// send hands stdin data to the writer. While the command is not reading its
// stdin this blocks, so it polls the socket for a hang-up meanwhile.
func (e *execution) send(ch chan<- []byte, b []byte) bool {
	select {
	case ch <- b:
		return true
	default:
	}
	t := time.NewTicker(hangupPoll)
	defer t.Stop()
	for {
		select {
		case ch <- b:
			return true
		case <-e.finished:
			return false
		case <-t.C:
			if peerHungUp(e.conn) {
				e.hangUp()
				return false
			}
		}
	}
}

func (e *execution) hangUp() { e.hangOnce.Do(func() { close(e.hangup) }) }

// writeStdin copies stdin data into the pipe. Once the command closes its
// stdin the rest is dropped, but the channel is still drained so readInput
// never blocks on it.
func (e *execution) writeStdin(w *os.File, ch <-chan []byte) {
	ok := true
	for b := range ch {
		if ok {
			_, err := w.Write(b)
			ok = err == nil
		}
	}
	w.Close()
}

// pump streams one output pipe as frames until the pipe is closed or EOF.
func (e *execution) pump(r *os.File, t FrameType, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := chunkPool.Get().(*[dataChunk]byte)
	defer chunkPool.Put(buf)
	for {
		n, err := r.Read(buf[:])
		if n > 0 {
			e.emit(t, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// emit sends output within the limit; beyond it data is dropped (but the
// pipe is still drained so the command never blocks on a full pipe).
func (e *execution) emit(t FrameType, p []byte) {
	e.outMu.Lock()
	if int64(len(p)) > e.outLeft {
		p = p[:e.outLeft]
		e.truncated = true
	}
	e.outLeft -= int64(len(p))
	e.outMu.Unlock()
	if len(p) == 0 || e.broken.Load() {
		return
	}
	if err := e.fw.WriteFrame(t, p); err != nil {
		e.broken.Store(true)
		e.hangUp()
	}
}

// peerHungUp reports whether the host closed its end, without consuming
// any data it may still have queued.
func peerHungUp(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	hung := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(fds, 0)
		hung = err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
	})
	return hung
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
