//go:build linux

package insandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// infoArgsBudget bounds the bytes of argv a ProcessInfo carries, so that
// every info stays a small control frame whatever the command line.
const infoArgsBudget = 4096

// decodeProcArgs decodes an operation's parameters strictly: an init older
// than its boxd must refuse a field it does not know (user, say) rather
// than ignore it and run the command as root.
func decodeProcArgs(req *wire.Request, v any) error {
	if len(req.Args) == 0 {
		return fmt.Errorf("%w: %s request without args", wire.ErrInvalid, req.Op)
	}
	dec := json.NewDecoder(bytes.NewReader(req.Args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s args: %v", wire.ErrInvalid, req.Op, err)
	}
	return nil
}

// signalProcCmd delivers sig: SIGKILL to the command's whole tree (its
// session), any other signal to its process group, as a terminal would.
func signalProcCmd(cmd *procCmd, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		cmd.kill()
		return
	}
	r, c := cmd.reaper, cmd.child
	r.mu.Lock()
	defer r.mu.Unlock()
	// Unreaped, the pid (and so the group id) cannot have been reused.
	if r.live[c.pid] == c {
		syscall.Kill(-c.pid, sig)
	}
}

// procResult turns a reaped child into a result.
func procResult(c *child, started, ended time.Time, timedOut, truncated bool) wire.ExecResult {
	res := wire.ExecResult{
		Started:   started,
		Ended:     ended,
		Truncated: truncated,
		UserCPU:   time.Duration(c.rusage.Utime.Nano()),
		SystemCPU: time.Duration(c.rusage.Stime.Nano()),
		MaxRSS:    c.rusage.Maxrss * 1024, // KiB
		// Blocks of 512 bytes, whatever the filesystem's block size.
		ReadBytes:  c.rusage.Inblock * 512,
		WriteBytes: c.rusage.Oublock * 512,
		PID:        c.pid,
		Lifetime:   c.lifetime(),
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
		res.ExitCode, res.TimedOut = wire.ExitTimeout, true
	}
	return res
}

// writeProcInput writes all of p to f, which may be a pipe the command
// does not read. It gives up when stop says so, checked every hangupPoll
// while blocked.
func writeProcInput(f *os.File, p []byte, stop func() bool) error {
	for len(p) > 0 {
		f.SetWriteDeadline(time.Now().Add(hangupPoll))
		n, err := f.Write(p)
		p = p[n:]
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if stop() {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// procInputHandler is what the host's frames during process-exec and
// process-attach act on.
type procInputHandler struct {
	stdin      func([]byte)
	closeStdin func()
	resize     func(wire.WindowSize) error
	signal     func(syscall.Signal)
}

// serveProcInput reads the host's frames until the connection ends or the host
// breaks the protocol, then calls gone.
func (s *Server) serveProcInput(fr *wire.FrameReader, h procInputHandler, gone func()) {
	defer gone()
	defer func() {
		// Outside handle's recover: a panic here would end PID 1.
		if p := recover(); p != nil {
			s.logf("panic serving input: %v\n%s", p, debug.Stack())
		}
	}()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f.Type {
		case wire.FrameStdin:
			h.stdin(f.Payload)
		case wire.FrameStdinClose:
			h.closeStdin()
		case wire.FrameRequest:
			var ctl wire.Request
			if err := json.Unmarshal(f.Payload, &ctl); err != nil {
				s.logf("control request: %v", err)
				return
			}
			if err := s.procControl(&ctl, h); err != nil {
				s.logf("control request %q: %v", ctl.Op, err)
			}
		default:
			// A confused host: stop as if it had gone.
			return
		}
	}
}

func (s *Server) procControl(ctl *wire.Request, h procInputHandler) error {
	switch ctl.Op {
	case wire.CtlResize:
		var ws wire.WindowSize
		if err := decodeProcArgs(ctl, &ws); err != nil {
			return err
		}
		return h.resize(ws)
	case wire.CtlSignal:
		var a wire.SignalArgs
		if err := decodeProcArgs(ctl, &a); err != nil {
			return err
		}
		sig, err := wire.ParseSignal(a.Signal)
		if err != nil {
			return err
		}
		h.signal(sig)
		return nil
	}
	return fmt.Errorf("%w: unknown control request", wire.ErrInvalid)
}

// fgExec is one foreground process-exec while it runs.
type fgExec struct {
	s         *Server
	conn      net.Conn
	cmd       *procCmd
	stdinOpen bool // owned by the input goroutine
	outputStream
}

// processExec runs a command in the foreground: like exec, plus a user, a
// terminal, and resize and signal requests while it runs.
func (s *Server) processExec(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var spec wire.ProcessSpec
	if err := decodeProcArgs(req, &spec); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	name := wire.Argv0(spec.Args)
	op := fmt.Sprintf("%s %q", req.Op, name)
	started := time.Now()
	sp, err := s.prepareProcess(&spec)
	var cmd *procCmd
	if err == nil {
		sp.stdin = len(spec.Stdin) > 0 || spec.StdinStream
		cmd, err = s.spawnProcess(sp)
	}
	if err != nil {
		var sf *startFailure
		if errors.As(err, &sf) {
			s.startFailed(fw, name, sf, started)
		} else {
			s.replyError(fw, op, err)
		}
		return
	}
	if !s.track(cmd.child, cmd.reaper) {
		cmd.kill() // Close ran meanwhile
	}
	defer s.untrack(cmd.child)
	cmd.escapees = !spec.ReportStart
	if !reportStart(fw, spec.ReportStart, cmd.child.pid) {
		cmd.kill()
		return
	}
	if !spec.Tty {
		defer closeFiles(cmd.stdin) // unblocks a write to a command that stopped reading
	}

	limit := spec.OutputLimit
	if limit == 0 {
		limit = wire.DefaultOutputLimit
	}
	e := &fgExec{s: s, conn: conn, cmd: cmd, stdinOpen: cmd.stdin != nil, outputStream: newOutputStream(fw, limit)}
	defer close(e.finished)
	go e.readInput(fr, &spec)
	var pumps sync.WaitGroup
	pumps.Add(1)
	go e.pump(cmd.stdout, wire.FrameStdout, &pumps)
	if cmd.stderr != nil {
		pumps.Add(1)
		go e.pump(cmd.stderr, wire.FrameStderr, &pumps)
	}

	timedOut, abandoned := waitProcCmd(cmd, spec.Timeout, e.hangup)
	ended := time.Now()
	e.drain(&pumps, cmd.closeOutputs, cmd.outputs()...)
	if abandoned || e.broken.Load() {
		return
	}
	res := procResult(cmd.child, started, ended, timedOut, e.truncated)
	if err := fw.WriteJSON(wire.FrameResult, res); err != nil {
		s.logf("%s: send result: %v", op, err)
	}
}

// waitProcCmd blocks until the command exits. A timeout or a closed
// hangup kills the command's tree first.
func waitProcCmd(cmd *procCmd, timeout time.Duration, hangup <-chan struct{}) (timedOut, abandoned bool) {
	var tc <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		tc = t.C
	}
	for {
		select {
		case <-cmd.child.done:
			return timedOut, abandoned
		case <-tc:
			timedOut, tc = true, nil
			cmd.kill()
		case <-hangup:
			abandoned, hangup = true, nil
			cmd.kill()
		}
	}
}

// stopWriting says whether a blocked stdin write should give up.
func (e *fgExec) stopWriting() bool {
	select {
	case <-e.finished:
		return true
	case <-e.hangup:
		return true
	default:
	}
	if peerHungUp(e.conn) {
		e.hangUp()
		return true
	}
	return false
}

func (e *fgExec) readInput(fr *wire.FrameReader, spec *wire.ProcessSpec) {
	if len(spec.Stdin) > 0 {
		e.writeStdin(spec.Stdin)
	}
	if !spec.StdinStream {
		e.closeStdin()
	}
	e.s.serveProcInput(fr, procInputHandler{
		stdin:      e.writeStdin,
		closeStdin: e.closeStdin,
		resize: func(ws wire.WindowSize) error {
			if e.cmd.pty == nil {
				return nil
			}
			return resizePty(e.cmd.pty, ws)
		},
		signal: func(sig syscall.Signal) { signalProcCmd(e.cmd, sig) },
	}, e.hangUp)
}

func (e *fgExec) writeStdin(p []byte) {
	if !e.stdinOpen {
		return
	}
	if err := writeProcInput(e.cmd.stdin, p, e.stopWriting); err != nil {
		// The command closed its stdin or stopped: drop the rest, as a
		// pipe would.
		e.closeStdin()
	}
}

// closeStdin ends the command's input. A terminal has no end of input
// short of closing it for good, so there it does nothing.
func (e *fgExec) closeStdin() {
	if e.cmd.pty != nil || !e.stdinOpen {
		return
	}
	e.stdinOpen = false
	e.cmd.stdin.Close()
}

// bgProc is a background process the init remembers.
type bgProc struct {
	info wire.ProcessInfo // the parts that never change
	seq  uint64           // start order
	cmd  *procCmd         // nil if the command could not be started
	log  *outputLog

	stdinMu   sync.Mutex // serialises writers; never held by readers of state
	stdinOpen atomic.Bool

	done   chan struct{} // closed once result is set
	result wire.ExecResult
}

// procTable is a server's background processes. It hangs off the Server
// through procTables so that server.go needs no field for it.
type procTable struct {
	startMu sync.Mutex // serialises admission and start, so the bound holds
	mu      sync.Mutex
	procs   map[string]*bgProc
	next    uint64
}

var procTables sync.Map // *Server -> *procTable

func (s *Server) processes() *procTable {
	if t, ok := procTables.Load(s); ok {
		return t.(*procTable)
	}
	t, _ := procTables.LoadOrStore(s, &procTable{procs: make(map[string]*bgProc)})
	return t.(*procTable)
}

// makeRoom evicts the oldest exited process if the table is full.
func (t *procTable) makeRoom() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.procs) < wire.MaxProcesses {
		return nil
	}
	var oldest *bgProc
	for _, p := range t.procs {
		if p.exited() && (oldest == nil || p.seq < oldest.seq) {
			oldest = p
		}
	}
	if oldest == nil {
		return &wire.RemoteError{Code: wire.CodeResourceExhausted,
			Message: fmt.Sprintf("%d background processes are running, the most the init keeps", wire.MaxProcesses)}
	}
	delete(t.procs, oldest.info.ID)
	return nil
}

func (t *procTable) add(p *bgProc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	p.seq = t.next
	p.info.ID = "p" + strconv.FormatUint(t.next, 10)
	t.procs[p.info.ID] = p
}

func (t *procTable) get(id string) (*bgProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.procs[id]; p != nil {
		return p, nil
	}
	return nil, &wire.RemoteError{Code: wire.CodeNotFound, Message: fmt.Sprintf("no process %q", id)}
}

func (t *procTable) list() []*bgProc {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*bgProc, 0, len(t.procs))
	for _, p := range t.procs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

func (p *bgProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// snapshot is the process's current ProcessInfo.
func (p *bgProc) snapshot() wire.ProcessInfo {
	info := p.info
	info.StdinOpen = p.stdinOpen.Load()
	info.State = wire.StateRunning
	if p.exited() {
		res := p.result
		info.State, info.Result = wire.StateExited, &res
	}
	return info
}

// trimProcArgs keeps argv within infoArgsBudget bytes for display.
func trimProcArgs(args []string) []string {
	out := make([]string, 0, len(args))
	left := infoArgsBudget
	for _, a := range args {
		if len(a) > left {
			out = append(out, a[:left]+"...")
			break
		}
		out = append(out, a)
		left -= len(a)
	}
	return out
}

// processStart starts a background process and replies with its id at
// once. Its output goes to a ring buffer that attach reads; it runs until
// it exits or is killed, whoever is connected.
func (s *Server) processStart(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var spec wire.ProcessSpec
	if err := decodeProcArgs(req, &spec); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	op := fmt.Sprintf("%s %q", req.Op, wire.Argv0(spec.Args))
	t := s.processes()
	t.startMu.Lock()
	defer t.startMu.Unlock()
	if err := t.makeRoom(); err != nil {
		s.replyError(fw, op, err)
		return
	}
	started := time.Now()
	sp, err := s.prepareProcess(&spec)
	var cmd *procCmd
	if err == nil {
		sp.stdin = len(spec.Stdin) > 0 || spec.StdinStream
		cmd, err = s.spawnProcess(sp)
	}
	var sf *startFailure
	if err != nil && !errors.As(err, &sf) {
		s.replyError(fw, op, err)
		return
	}
	p := &bgProc{
		info: wire.ProcessInfo{Args: trimProcArgs(spec.Args), User: s.shownUser(spec.User), Tty: spec.Tty, Started: started},
		cmd:  cmd,
		log:  newOutputLog(wire.ProcessLogBytes),
		done: make(chan struct{}),
	}
	t.add(p)
	if sf != nil {
		// Like a shell: a message on stderr and 126 or 127, kept for
		// attach and wait.
		p.log.write(1, fmt.Appendf(nil, "boxd: exec %q: %v\n", wire.Argv0(spec.Args), sf.err))
		p.result = wire.ExecResult{ExitCode: sf.code, Started: started, Ended: time.Now()}
		close(p.done)
		p.log.close()
	} else {
		p.info.PID = cmd.child.pid
		p.stdinOpen.Store(cmd.stdin != nil)
		if !s.track(cmd.child, cmd.reaper) {
			cmd.kill()
		}
		go p.run(s, &spec, started)
	}
	if err := fw.WriteJSON(wire.FrameResult, p.snapshot()); err != nil {
		s.logf("%s: send result: %v", op, err)
	}
}

// run supervises a background process until it exits.
func (p *bgProc) run(s *Server, spec *wire.ProcessSpec, started time.Time) {
	cmd := p.cmd
	defer s.untrack(cmd.child)
	var pumps sync.WaitGroup
	pumps.Add(1)
	go p.pump(cmd.stdout, 0, &pumps)
	if cmd.stderr != nil {
		pumps.Add(1)
		go p.pump(cmd.stderr, 1, &pumps)
	}
	if cmd.stdin != nil {
		go func() {
			if len(spec.Stdin) > 0 {
				p.writeStdin(spec.Stdin, p.exited)
			}
			if !spec.StdinStream {
				p.closeStdin()
			}
		}()
	}
	timedOut, _ := waitProcCmd(cmd, spec.Timeout, nil)
	ended := time.Now()
	if drainOutputs(&pumps, cmd.closeOutputs, cmd.outputs()...) {
		p.log.loseOutput()
	}
	// Closing under a blocked writer is fine: its write fails.
	if p.stdinOpen.Swap(false) && cmd.pty == nil {
		cmd.stdin.Close()
	}
	p.result = procResult(cmd.child, started, ended, timedOut, p.log.lostOutput())
	close(p.done)
	p.log.close()
}

func (p *bgProc) pump(r *os.File, stream int, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := chunkPool.Get().(*[wire.DataChunk]byte)
	defer chunkPool.Put(buf)
	for {
		n, err := r.Read(buf[:])
		p.log.write(stream, buf[:n])
		if err != nil {
			return
		}
	}
}

// writeStdin feeds the process's stdin; attached clients share it.
func (p *bgProc) writeStdin(b []byte, stop func() bool) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if !p.stdinOpen.Load() {
		return
	}
	if err := writeProcInput(p.cmd.stdin, b, func() bool { return stop() || p.exited() }); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		p.closeStdin()
	}
}

// closeStdin ends a pipe stdin; a terminal stays open (see
// fgExec.closeStdin).
func (p *bgProc) closeStdin() {
	if p.cmd != nil && p.cmd.pty == nil && p.stdinOpen.Swap(false) {
		p.cmd.stdin.Close()
	}
}

func (p *bgProc) signal(sig syscall.Signal) {
	if p.cmd != nil && !p.exited() {
		signalProcCmd(p.cmd, sig)
	}
}

func (p *bgProc) resize(ws wire.WindowSize) error {
	if p.cmd == nil || p.cmd.pty == nil || p.exited() {
		return nil
	}
	return resizePty(p.cmd.pty, ws)
}

func (s *Server) lookupProcess(fw *wire.FrameWriter, req *wire.Request, v any, id func() string) *bgProc {
	if err := decodeProcArgs(req, v); err != nil {
		s.replyError(fw, req.Op, err)
		return nil
	}
	p, err := s.processes().get(id())
	if err != nil {
		s.replyError(fw, req.Op, err)
		return nil
	}
	return p
}

// processAttach sends a process's info, its buffered output, then its
// live output and its result, while passing the host's input on.
// Disconnecting leaves the process running.
func (s *Server) processAttach(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.AttachArgs
	p := s.lookupProcess(fw, req, &a, func() string { return a.ID })
	if p == nil {
		return
	}
	if fw.WriteJSON(wire.FrameResult, p.snapshot()) != nil {
		return
	}
	hangup := make(chan struct{})
	gone := sync.OnceFunc(func() { close(hangup) })
	hungUp := func() bool {
		select {
		case <-hangup:
			return true
		default:
			return false
		}
	}
	h := procInputHandler{
		stdin:      func([]byte) {},
		closeStdin: func() {},
		resize:     p.resize,
		signal:     p.signal,
	}
	if a.Stdin {
		h.stdin = func(b []byte) { p.writeStdin(b, func() bool { return hungUp() || peerHungUp(conn) }) }
		h.closeStdin = p.closeStdin
	}
	go s.serveProcInput(fr, h, gone)

	var cur logCursor
	for {
		stream, data, wake, closed := p.log.next(&cur, wire.DataChunk)
		switch {
		case data != nil:
			t := wire.FrameStdout
			if stream == 1 {
				t = wire.FrameStderr
			}
			if fw.WriteFrame(t, data) != nil {
				return
			}
			continue
		case closed:
			res := p.result
			res.Truncated = res.Truncated || cur.missed
			fw.WriteJSON(wire.FrameResult, res)
			return
		case a.NoFollow:
			fw.WriteFrame(wire.FrameOK, nil)
			return
		}
		select {
		case <-wake:
		case <-hangup:
			return
		}
	}
}

func (s *Server) processList(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	procs := s.processes().list()
	infos := make([]wire.ProcessInfo, 0, len(procs))
	for _, p := range procs {
		infos = append(infos, p.snapshot())
	}
	if err := fw.WriteJSON(wire.FrameResult, infos); err != nil {
		s.logf("%s: send result: %v", req.Op, err)
	}
}

// processWait replies once the process has exited, or gives up when the
// host goes away.
func (s *Server) processWait(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var ref wire.ProcessRef
	p := s.lookupProcess(fw, req, &ref, func() string { return ref.ID })
	if p == nil {
		return
	}
	hangup := make(chan struct{})
	go func() {
		fr.ReadFrame() // the host sends nothing more: any return is a hang-up
		close(hangup)
	}()
	select {
	case <-p.done:
		fw.WriteJSON(wire.FrameResult, p.snapshot())
	case <-hangup:
	}
}

func (s *Server) processSignal(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.SignalArgs
	p := s.lookupProcess(fw, req, &a, func() string { return a.ID })
	if p == nil {
		return
	}
	sig, err := wire.ParseSignal(a.Signal)
	if err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	if p.exited() {
		s.replyError(fw, req.Op, &wire.RemoteError{Code: wire.CodeFailedPrecondition,
			Message: fmt.Sprintf("process %s has already exited", p.info.ID)})
		return
	}
	p.signal(sig)
	fw.WriteJSON(wire.FrameResult, p.snapshot())
}
