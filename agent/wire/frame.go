package wire

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// FrameType is the first byte of every frame on the agent channel.
type FrameType byte

// Frame types. The values are part of the wire format: append, never renumber.
const (
	FrameRequest    FrameType = 1  // JSON request naming the operation; first frame from the host
	FrameStdin      FrameType = 2  // stdin bytes for a running exec
	FrameStdinClose FrameType = 3  // end of stdin
	FrameStdout     FrameType = 4  // stdout bytes
	FrameStderr     FrameType = 5  // stderr bytes
	FrameResult     FrameType = 6  // JSON ExecResult; last frame of a successful exec
	FrameError      FrameType = 7  // JSON RemoteError; ends the operation
	FrameTar        FrameType = 8  // a piece of a tar stream
	FrameTarEnd     FrameType = 9  // end of a tar stream
	FrameOK         FrameType = 10 // operation succeeded, nothing to return
	// FrameStarted carries a started command's pid (decimal, in the
	// sandbox's pid namespace), first frame of an exec whose request set
	// ReportStart: boxd places the command in its own cgroup.
	FrameStarted FrameType = 11

	maxFrameType = FrameStarted
)

// MaxFramePayload bounds every frame so that neither side can be made to
// allocate more than this per frame, whatever the peer claims.
const MaxFramePayload = 1 << 20

// FrameHeaderLen is 1 type byte plus a 4 byte big-endian payload length.
const FrameHeaderLen = 5

// DataChunk is how much stream data (stdout, stdin, tar) goes in one frame:
// big enough to amortise the header and syscalls, small enough to keep
// per-connection buffers modest in the init.
const DataChunk = 32 << 10

// Errors a FrameReader returns for malformed input; wrapped with details.
var (
	ErrFrameTooLarge = errors.New("frame payload too large")
	ErrUnknownFrame  = errors.New("unknown frame type")
)

var frameNames = [...]string{
	FrameRequest:    "request",
	FrameStdin:      "stdin",
	FrameStdinClose: "stdin-close",
	FrameStdout:     "stdout",
	FrameStderr:     "stderr",
	FrameResult:     "result",
	FrameError:      "error",
	FrameTar:        "tar",
	FrameTarEnd:     "tar-end",
	FrameOK:         "ok",
	FrameStarted:    "started",
}

func (t FrameType) String() string {
	if t.valid() {
		return frameNames[t]
	}
	return fmt.Sprintf("frame(%d)", byte(t))
}

func (t FrameType) valid() bool { return t >= FrameRequest && t <= maxFrameType }

// Frame is one decoded frame. Payload aliases the reader's buffer and is only
// valid until the next ReadFrame.
type Frame struct {
	Type    FrameType
	Payload []byte
}

// FrameReader decodes frames from a stream.
type FrameReader struct {
	r   *bufio.Reader
	hdr [FrameHeaderLen]byte
	buf []byte
}

// NewFrameReader buffers r so that small frames cost one read syscall.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, 4096)}
}

// Reset makes fr read from r, dropping anything buffered.
func (fr *FrameReader) Reset(r io.Reader) { fr.r.Reset(r) }

// Buffered is how many bytes are read from the stream but not yet
// returned as frames.
func (fr *FrameReader) Buffered() int { return fr.r.Buffered() }

// ReadFrame returns the next frame. It returns io.EOF only on a clean end of
// stream between frames; a stream cut inside a frame is io.ErrUnexpectedEOF.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return Frame{}, err
	}
	t := FrameType(fr.hdr[0])
	n := binary.BigEndian.Uint32(fr.hdr[1:])
	if !t.valid() {
		return Frame{}, fmt.Errorf("%w %d", ErrUnknownFrame, fr.hdr[0])
	}
	if n > MaxFramePayload {
		return Frame{}, fmt.Errorf("%s frame: %w: %d > %d bytes", t, ErrFrameTooLarge, n, MaxFramePayload)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	p := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, fmt.Errorf("%s frame: %w", t, err)
	}
	return Frame{Type: t, Payload: p}, nil
}

// FrameWriter encodes frames. It is safe for concurrent use; each frame is
// written atomically with respect to other frames of the same writer.
type FrameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	hdr [FrameHeaderLen]byte
	buf []byte
}

// NewFrameWriter writes frames to w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// copyLimit is the largest payload coalesced with its header into one write;
// bigger payloads are written separately rather than copied.
const copyLimit = 64 << 10

// WriteFrame writes one frame.
func (fw *FrameWriter) WriteFrame(t FrameType, payload []byte) error {
	if !t.valid() {
		return fmt.Errorf("write frame: %w %d", ErrUnknownFrame, byte(t))
	}
	if len(payload) > MaxFramePayload {
		return fmt.Errorf("write %s frame: %w: %d bytes", t, ErrFrameTooLarge, len(payload))
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	hdr := fw.hdr[:] // a field, not a local: passed to Write it would escape
	hdr[0] = byte(t)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if len(payload) <= copyLimit {
		fw.buf = append(append(fw.buf[:0], hdr...), payload...)
		_, err := fw.w.Write(fw.buf)
		return err
	}
	if _, err := fw.w.Write(hdr); err != nil {
		return err
	}
	_, err := fw.w.Write(payload)
	return err
}

// WriteJSON writes v as the JSON payload of one frame.
func (fw *FrameWriter) WriteJSON(t FrameType, v any) error {
	if b, ok := appendJSON(make([]byte, 0, 256), v); ok {
		return fw.WriteFrame(t, b)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s frame: %w", t, err)
	}
	return fw.WriteFrame(t, b)
}

// StreamWriter returns an io.Writer that sends everything written to it as
// frames of type t, splitting large writes.
func (fw *FrameWriter) StreamWriter(t FrameType) io.Writer {
	return frameStream{fw: fw, t: t}
}

type frameStream struct {
	fw *FrameWriter
	t  FrameType
}

func (s frameStream) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), DataChunk)
		if err := s.fw.WriteFrame(s.t, p[:c]); err != nil {
			return n, err
		}
		n += c
		p = p[c:]
	}
	return n, nil
}
