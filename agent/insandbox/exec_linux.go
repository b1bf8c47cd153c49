//go:build linux

package insandbox

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// execution is the state of one exec while it runs.
type execution struct {
	req  *wire.ExecRequest
	conn net.Conn
	fr   *wire.FrameReader
	cmd  *command
	outputStream
}

// exec runs one command for the host: output streams back as it is
// produced and a result frame ends the exchange, unless the host left.
func (s *Server) exec(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.ExecRequest) {
	name := ""
	if len(req.Args) > 0 {
		name = req.Args[0]
	}
	op := fmt.Sprintf("exec %q", name)
	started := time.Now()
	cmd, err := s.start(req)
	if err != nil {
		if sf, ok := err.(*startFailure); ok {
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
	go e.readInput(stdinCh)
	var pumps sync.WaitGroup
	pumps.Add(1)
	go e.pump(cmd.stdout, wire.FrameStdout, &pumps)
	if cmd.stderr != nil { // nil: combined into stdout
		pumps.Add(1)
		go e.pump(cmd.stderr, wire.FrameStderr, &pumps)
	}

	timedOut, abandoned := e.wait()
	ended := time.Now()
	e.drain(&pumps, func() { closeFiles(e.cmd.stdout, e.cmd.stderr) }, e.cmd.stdout, e.cmd.stderr)
	if abandoned || e.broken.Load() {
		return
	}
	res := e.result(started, ended, timedOut)
	if err := fw.WriteJSON(wire.FrameResult, res); err != nil {
		s.logf("%s: send result: %v", op, err)
	}
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
