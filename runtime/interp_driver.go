//go:build linux

// Room: interp. The host's end of the in-sandbox code interpreter driver
// (interp_driver.py): one driver process per sandbox, started through the
// exec path, and the frames it sends on its stdout, read with bounds.
// Everything the driver says is the sandbox's and hostile.

package runtime

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

//go:embed interp_driver.py
var interpDriverSource string

const (
	// maxDriverFrame bounds one frame from the driver: a larger length
	// prefix ends the driver before anything is allocated for it.
	maxDriverFrame = 1 << 20
	// driverQueue is how many decoded frames wait for the caller; the
	// reader stops reading (and the driver's writes block) beyond it.
	driverQueue = 8
	// driverOutputLimit is the driver process's output cap over its whole
	// life: in effect none (each run has its own, enforced here).
	driverOutputLimit = 1 << 62
	// stderrTail is how much of the driver's stderr is kept for errors.
	stderrTail = 4 << 10
)

// driverMsg is one frame from the driver, decoded. Which fields are set
// depends on T.
type driverMsg struct {
	T         string            `json:"t"`
	ID        int64             `json:"id"`
	S         string            `json:"s"` // out: stdout or stderr
	B         string            `json:"b"` // out: the text
	Data      map[string]string `json:"data"`
	Name      string            `json:"name"`
	Value     string            `json:"value"`
	Traceback []string          `json:"traceback"`
	Missing   []string          `json:"missing"`
	Code      string            `json:"code"`
	Msg       string            `json:"msg"`
	Contexts  []struct {
		Name  string `json:"name"`
		Count int64  `json:"count"`
	} `json:"contexts"`
	Count       int64 `json:"count"`
	TimedOut    bool  `json:"timed_out"`
	Interrupted bool  `json:"interrupted"`
	Restarted   bool  `json:"restarted"`
	Truncated   bool  `json:"truncated"`
}

// interpDriver is a running driver: its stream, and the frames its reader
// goroutine decoded.
type interpDriver struct {
	ps *host.ProcessStream
	// ctx is the stream's; cancel closes the connection to the init,
	// which kills the driver's tree (ProcessStream.Close is the reader
	// goroutine's alone).
	ctx    context.Context
	cancel context.CancelFunc
	msgs   chan driverMsg
	done   chan struct{} // closed when the reader stops; err says why
	err    error
	exit   *wire.ExecResult // how the driver ended, if it did
	wmu    sync.Mutex       // one frame written at a time
	smu    sync.Mutex
	tail   []byte // the end of the driver's stderr
	next   int64  // the last request id
}

func newInterpDriver(ctx context.Context, cancel context.CancelFunc, ps *host.ProcessStream) *interpDriver {
	d := &interpDriver{ps: ps, ctx: ctx, cancel: cancel, msgs: make(chan driverMsg, driverQueue), done: make(chan struct{})}
	go d.read()
	return d
}

// read turns the driver's stdout into frames until it ends or breaks the
// protocol (then the driver is killed: closing its stream kills its tree).
func (d *interpDriver) read() {
	var buf []byte
	defer close(d.done)
	defer d.cancel()
	for {
		ev, err := d.ps.Next()
		if err != nil {
			d.err = fmt.Errorf("interpreter driver: %w", err)
			d.ps.Close()
			return
		}
		if ev.Result != nil {
			d.exit = ev.Result
			d.err = fmt.Errorf("interpreter driver exited (code %d%s)%s", ev.Result.ExitCode, signalNote(ev.Result.Signal), d.stderrNote())
			return
		}
		if ev.Stream == wire.FrameStderr {
			d.keepStderr(ev.Data)
			continue
		}
		buf = append(buf, ev.Data...)
		if buf, err = d.frames(buf); err != nil {
			d.err = fmt.Errorf("interpreter driver: %w: %v", wire.ErrProtocol, err)
			d.ps.Close()
			return
		}
	}
}

// frames decodes the whole frames at buf's start, queues them and returns
// what is left. A length over maxDriverFrame is an error as soon as its
// prefix is in, so buf never holds more than one frame and a chunk.
func (d *interpDriver) frames(buf []byte) ([]byte, error) {
	for len(buf) >= 4 {
		n := binary.BigEndian.Uint32(buf)
		if n > maxDriverFrame {
			return nil, fmt.Errorf("frame of %d bytes (at most %d)", n, maxDriverFrame)
		}
		if len(buf) < 4+int(n) {
			break
		}
		var m driverMsg
		if err := json.Unmarshal(buf[4:4+n], &m); err != nil {
			return nil, fmt.Errorf("malformed frame: %v", err)
		}
		buf = buf[4+n:]
		select {
		case d.msgs <- m:
		case <-d.ctx.Done():
			return nil, d.ctx.Err()
		}
	}
	// Keep the remainder in a buffer of its own size: a consumed prefix
	// must not pin a large array.
	return append([]byte(nil), buf...), nil
}

func (d *interpDriver) keepStderr(b []byte) {
	d.smu.Lock()
	defer d.smu.Unlock()
	d.tail = append(d.tail, b...)
	if len(d.tail) > stderrTail {
		d.tail = append([]byte(nil), d.tail[len(d.tail)-stderrTail:]...)
	}
}

func (d *interpDriver) stderrNote() string {
	d.smu.Lock()
	defer d.smu.Unlock()
	if len(d.tail) == 0 {
		return ""
	}
	return fmt.Sprintf(": %q", string(d.tail))
}

func signalNote(sig string) string {
	if sig == "" {
		return ""
	}
	return ", " + sig
}

// alive reports whether the driver still runs.
func (d *interpDriver) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// send writes one request frame to the driver's stdin.
func (d *interpDriver) send(req map[string]any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode interpreter request: %w", err)
	}
	frame := make([]byte, 4, 4+len(b))
	binary.BigEndian.PutUint32(frame, uint32(len(b)))
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.ps.Write(append(frame, b...)); err != nil {
		return fmt.Errorf("interpreter driver: send: %w", err)
	}
	return nil
}

// kill ends the driver and every kernel (its process tree).
func (d *interpDriver) kill() {
	d.cancel()
	<-d.done
}
