package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"connectrpc.com/connect"
	"golang.org/x/term"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// procConn is boxctl's side of an Exec or Attach stream. Sends come from
// several goroutines (stdin, window changes), which connect does not allow
// at once, hence mu.
type procConn struct {
	stream *connect.BidiStreamForClient[boxdv1.ProcessInput, boxdv1.ProcessOutput]
	mu     sync.Mutex
	closed bool
	usage  *boxdv1.ResourceUsage // with the result
}

func (p *procConn) send(msg *boxdv1.ProcessInput) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return io.ErrClosedPipe
	}
	return p.stream.Send(msg)
}

// closeRequest tells boxd that nothing more will be sent.
func (p *procConn) closeRequest() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		_ = p.stream.CloseRequest()
	}
}

// detachKeys, typed on a terminal attached to a background process, leave
// it running (docker's ctrl-p ctrl-q).
var detachKeys = []byte{0x10, 0x11}

var errDetached = errors.New("detached")

// copyStdin sends boxctl's stdin to the process. At EOF it closes the
// process's stdin if closeAtEOF, then the request side of the stream. With
// detach, the detach keys end the copy and are reported on detached.
func (p *procConn) copyStdin(closeAtEOF bool, detach bool, detached chan<- struct{}) {
	buf := make([]byte, 32<<10)
	var prev byte
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			data := buf[:n]
			if detach {
				if i := detachAt(prev, data); i >= 0 {
					if i > 0 {
						_ = p.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Stdin{Stdin: append([]byte(nil), data[:i]...)}})
					}
					close(detached)
					return
				}
				prev = data[n-1]
			}
			if p.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Stdin{Stdin: append([]byte(nil), data...)}}) != nil {
				return
			}
		}
		if err != nil {
			if closeAtEOF {
				_ = p.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_CloseStdin{CloseStdin: true}})
				p.closeRequest()
			}
			return
		}
	}
}

// detachAt returns where the detach keys start in data (prev being the
// byte read before it), or -1. A sequence split across reads starts at 0:
// its first half was already sent.
func detachAt(prev byte, data []byte) int {
	if prev == detachKeys[0] && data[0] == detachKeys[1] {
		return 0
	}
	for i := 0; i+1 < len(data); i++ {
		if data[i] == detachKeys[0] && data[i+1] == detachKeys[1] {
			return i
		}
	}
	return -1
}

// windowSize is the local terminal's size, if boxctl has one.
func windowSize() *boxdv1.WindowSize {
	for _, f := range []*os.File{os.Stdout, os.Stdin, os.Stderr} {
		if w, h, err := term.GetSize(int(f.Fd())); err == nil && w > 0 && h > 0 {
			return &boxdv1.WindowSize{Rows: uint32(h), Cols: uint32(w)}
		}
	}
	return nil
}

// rawTerminal puts boxctl's terminal in raw mode, so that every key,
// ctrl-c included, goes to the remote terminal, and forwards window size
// changes. The returned function undoes both.
func (p *procConn) rawTerminal() (restore func(), err error) {
	fd := int(os.Stdin.Fd())
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, fmt.Errorf("raw mode: %w", err)
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				if ws := windowSize(); ws != nil {
					_ = p.send(&boxdv1.ProcessInput{Event: &boxdv1.ProcessInput_Resize{Resize: ws}})
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
		_ = term.Restore(fd, state)
	}, nil
}

// receive writes the process's output to boxctl's stdout and stderr until
// the result, which it returns; nil if the stream ended without one.
func (p *procConn) receive() (*boxdv1.ExecResult, error) {
	for {
		msg, err := p.stream.Receive()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		switch ev := msg.Event.(type) {
		case *boxdv1.ProcessOutput_Stdout:
			if _, err := os.Stdout.Write(ev.Stdout); err != nil {
				return nil, err
			}
		case *boxdv1.ProcessOutput_Stderr:
			_, _ = os.Stderr.Write(ev.Stderr)
		case *boxdv1.ProcessOutput_Result:
			p.usage = msg.Usage
			return ev.Result, nil
		}
	}
}

// exitWith turns a result into boxctl's exit, first saying on stderr what
// the exit code alone does not: a timeout, an OOM kill, lost output.
func exitWith(res *boxdv1.ExecResult) error {
	for _, line := range resultNotices(res) {
		fmt.Fprintln(os.Stderr, "boxctl: "+line)
	}
	if res.ExitCode != 0 {
		return exitError{int(res.ExitCode)}
	}
	return nil
}

// resultNotices are the lines that explain a result beyond its exit code.
func resultNotices(res *boxdv1.ExecResult) []string {
	var lines []string
	if res.TimedOut {
		lines = append(lines, "command timed out and was killed")
	}
	if res.OomKilled {
		lines = append(lines, "command was killed: the sandbox ran out of memory (oom_killed)")
	}
	if res.Truncated {
		lines = append(lines, "output truncated (the output limit, or output still unread when the command's pipes were closed)")
	}
	return lines
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
