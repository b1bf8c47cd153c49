//go:build linux

package insandbox

import (
	"bytes"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// hangupPoll is how often a blocked stdin writer checks whether the host has
// gone away; while it is blocked nobody else is reading the connection.
const hangupPoll = 200 * time.Millisecond

var chunkPool = sync.Pool{New: func() any { return new([wire.DataChunk]byte) }}

// readInput owns the connection's read side during an exec: it forwards
// stdin and notices the host going away. It returns what ended it: the
// read's error, or nil for a frame that has no place here.
func (e *execution) readInput(stdin chan<- []byte) error {
	open := true
	closeStdin := func() {
		if open {
			close(stdin)
			open = false
		}
	}
	defer closeStdin()
	if len(e.req.Stdin) > 0 && !e.send(stdin, e.req.Stdin) {
		return nil
	}
	if !e.req.StdinStream {
		closeStdin()
	}
	for {
		f, err := e.fr.ReadFrame()
		if err != nil {
			e.hangUp() // EOF: the host closed or cancelled
			return err
		}
		switch {
		case f.Type == wire.FrameStdin && open:
			if !e.send(stdin, bytes.Clone(f.Payload)) {
				return nil
			}
		case f.Type == wire.FrameStdinClose && open:
			closeStdin()
		default:
			// A confused host: stop as if it had gone.
			e.hangUp()
			return nil
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
