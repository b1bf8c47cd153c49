//go:build linux

package insandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// execution is the state of one exec while it runs.
type execution struct {
	req  *wire.ExecRequest
	conn net.Conn
	fr   *wire.FrameReader
	cmd  *procCmd
	outputStream
}

// exec runs one command for the host: output streams back as it is
// produced and a result frame ends the exchange, unless the host left.
// With keep (an exec without stdin whose host asked to keep the
// connection) it reports whether the connection stays for another
// request, which the result's Kept tells the host too.
func (s *Server) exec(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.ExecRequest, keep bool) bool {
	name := ""
	if len(req.Args) > 0 {
		name = req.Args[0]
	}
	op := fmt.Sprintf("exec %q", name)
	started := time.Now()
	cmd, err := s.spawnExec(req)
	if err != nil {
		var sf *startFailure
		if errors.As(err, &sf) {
			s.startFailed(fw, name, sf, started)
		} else {
			s.replyError(fw, op, err)
		}
		return false
	}
	if !s.track(cmd.child, cmd.reaper) {
		cmd.kill() // Close ran meanwhile
	}
	defer s.untrack(cmd.child)
	cmd.escapees = !req.ReportStart
	if !reportStart(fw, req.ReportStart, cmd.child.pid) {
		cmd.kill()
		return false
	}

	limit := req.OutputLimit
	if limit == 0 {
		limit = wire.DefaultOutputLimit
	}
	e := &execution{req: req, conn: conn, fr: fr, cmd: cmd, outputStream: newOutputStream(fw, limit)}
	defer close(e.finished)
	stdinCh := make(chan []byte, 2)
	if cmd.stdin != nil {
		go e.writeStdin(cmd.stdin, stdinCh)
		defer cmd.stdin.Close() // unblocks a write to a command that stopped reading
	}
	inputDone := make(chan error, 1)
	go func() { inputDone <- e.readInput(stdinCh) }()
	var pumps sync.WaitGroup
	pumps.Add(1)
	go e.pump(cmd.stdout, wire.FrameStdout, &pumps)
	if cmd.stderr != nil { // nil: combined into stdout
		pumps.Add(1)
		go e.pump(cmd.stderr, wire.FrameStderr, &pumps)
	}

	timedOut, abandoned := e.wait()
	ended := time.Now()
	if keep && !abandoned {
		// Start taking the read side back (release) while the output
		// drains, rather than after.
		conn.SetReadDeadline(ended)
	}
	e.drain(&pumps, func() { closeFiles(e.cmd.stdout, e.cmd.stderr) }, e.cmd.stdout, e.cmd.stderr)
	if abandoned || e.broken.Load() {
		return false
	}
	// A kept connection's read side comes back before the result goes
	// out: once the host has the result it may send its next request,
	// which readInput must not take for a stray frame.
	kept := keep && e.release(inputDone)
	res := e.result(started, ended, timedOut)
	res.Kept = kept
	if err := fw.WriteJSON(wire.FrameResult, res); err != nil {
		s.logf("%s: send result: %v", op, err)
		return false
	}
	return kept
}

// release takes the connection's read side back from readInput, for the
// next request of a kept connection: a read deadline in the past (set by
// exec once the command exited) ends its wait. The connection is clean
// only if that is what ended it; a frame from the host meanwhile, or its
// hang-up, ends the connection instead.
func (e *execution) release(inputDone <-chan error) bool {
	defer e.conn.SetReadDeadline(time.Time{})
	select {
	case err := <-inputDone:
		return errors.Is(err, os.ErrDeadlineExceeded)
	case <-time.After(time.Second): // blocked elsewhere than the read: give the connection up
		return false
	}
}

// reportStart sends the started frame when the host asked for it: boxd
// moves the command into its own cgroup on it. It reports false when the
// host is gone.
func reportStart(fw *wire.FrameWriter, want bool, pid int) bool {
	if !want {
		return true
	}
	return fw.WriteFrame(wire.FrameStarted, strconv.AppendInt(nil, int64(pid), 10)) == nil
}

// wait blocks until the command exits. A timeout or the host going away
// kills the command's tree first.
func (e *execution) wait() (timedOut, abandoned bool) {
	var timeout <-chan time.Time
	if e.req.Timeout > 0 {
		t := time.NewTimer(e.req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	hangup := e.hangup
	for {
		select {
		case <-e.cmd.child.done:
			return timedOut, abandoned
		case <-timeout:
			timedOut, timeout = true, nil
			e.cmd.kill()
		case <-hangup:
			abandoned, hangup = true, nil
			e.cmd.kill()
		}
	}
}

func (e *execution) result(started, ended time.Time, timedOut bool) wire.ExecResult {
	return procResult(e.cmd.child, started, ended, timedOut, e.truncated)
}

// spawnExec starts an exec's command with the spawner processes and
// sessions use: piped stdio (stdin only if the request brings any), no
// terminal.
func (s *Server) spawnExec(req *wire.ExecRequest) (*procCmd, error) {
	sp, err := s.prepareProcess(&wire.ProcessSpec{ExecRequest: *req})
	if err != nil {
		return nil, err
	}
	sp.stdin = len(req.Stdin) > 0 || req.StdinStream
	return s.spawnProcess(sp)
}
