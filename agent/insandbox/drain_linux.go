//go:build linux

package insandbox

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// exitGrace is how long the output pipes may stay open but empty after a
// command exits. A background child that inherited stdout would otherwise
// hold the exec open for as long as it lives.
const exitGrace = 100 * time.Millisecond

// drainLimit bounds how long output the command wrote before it exited is
// still delivered after the exit, when the host reads it slowly (a loaded
// machine, a slow client): past it the rest is dropped and the result says
// truncated.
const drainLimit = 30 * time.Second

// drainOutputs lets a finished command's output pumps finish (awaitDrain),
// then closes the read ends with closeAll, which stops the pumps even if a
// background process still holds the write ends. It returns only once
// every pump has stopped, so no output can follow the result, and says
// whether output the command wrote was still unread at drainLimit.
func drainOutputs(pumps *sync.WaitGroup, closeAll func(), fs ...*os.File) (lost bool) {
	done := make(chan struct{})
	go func() { pumps.Wait(); close(done) }()
	lost = awaitDrain(done, fs...)
	closeAll()
	<-done
	return lost
}

// awaitDrain waits after a command's exit until its output pumps are done
// (done closes), or until the pipes in fs have held nothing for exitGrace:
// then only a background process could still write, and the caller closes
// the read ends. While a pipe still holds bytes the command wrote, the
// pumps are behind, not done, and closing would lose them; so it waits on,
// up to drainLimit, and reports lost if bytes were still there then.
func awaitDrain(done <-chan struct{}, fs ...*os.File) (lost bool) {
	deadline := time.Now().Add(drainLimit)
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	for {
		select {
		case <-done:
			return false
		case <-t.C:
		}
		if buffered(fs...) == 0 {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
		t.Reset(10 * time.Millisecond)
	}
}

// buffered is how many bytes wait unread in the pipes (or terminal) fs.
// TIOCINQ is FIONREAD: pipes and terminals both answer it. It uses the
// descriptor through SyscallConn, so it neither blocks nor
// changes the files' non-blocking mode.
func buffered(fs ...*os.File) int {
	total := 0
	for _, f := range fs {
		if f == nil {
			continue
		}
		rc, err := f.SyscallConn()
		if err != nil {
			continue
		}
		_ = rc.Control(func(fd uintptr) {
			if n, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				total += n
			}
		})
	}
	return total
}
