//go:build linux

package insandbox

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/boxd-dev/boxd/agent/wire"
)

// outputStream is the output side of a foreground command, shared by exec
// and the process service's interactive exec: pipes pumped into frames
// under an output cap, and the signals that the host went away.
type outputStream struct {
	fw *wire.FrameWriter

	outMu     sync.Mutex
	outLeft   int64 // bytes of output still allowed
	truncated bool

	broken   atomic.Bool   // a frame write failed: the host is gone
	hangup   chan struct{} // closed when the host goes away
	hangOnce sync.Once
	finished chan struct{} // closed when the command is over
}

func newOutputStream(fw *wire.FrameWriter, limit int64) outputStream {
	return outputStream{fw: fw, outLeft: limit, hangup: make(chan struct{}), finished: make(chan struct{})}
}

func (o *outputStream) hangUp() { o.hangOnce.Do(func() { close(o.hangup) }) }

// pump streams one output pipe as frames until the pipe is closed or EOF.
func (o *outputStream) pump(r *os.File, t wire.FrameType, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := chunkPool.Get().(*[wire.DataChunk]byte)
	defer chunkPool.Put(buf)
	for {
		n, err := r.Read(buf[:])
		if n > 0 {
			o.emit(t, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// drain ends the output after the command exited (drainOutputs); output
// still unread at the drain limit marks the result truncated.
func (o *outputStream) drain(pumps *sync.WaitGroup, closeAll func(), fs ...*os.File) {
	if drainOutputs(pumps, closeAll, fs...) {
		o.outMu.Lock()
		o.truncated = true
		o.outMu.Unlock()
	}
}

// emit sends output within the limit; beyond it data is dropped, but the
// pipe is still drained so the command never blocks on a full pipe.
func (o *outputStream) emit(t wire.FrameType, p []byte) {
	o.outMu.Lock()
	if int64(len(p)) > o.outLeft {
		p = p[:o.outLeft]
		o.truncated = true
	}
	o.outLeft -= int64(len(p))
	o.outMu.Unlock()
	if len(p) == 0 || o.broken.Load() {
		return
	}
	if err := o.fw.WriteFrame(t, p); err != nil {
		o.broken.Store(true)
		o.hangUp()
	}
}
