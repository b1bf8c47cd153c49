package apiwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"

	"connectrpc.com/connect"
)

// streamReadBytes is how much of a message stream either end takes from
// the HTTP/2 connection per read.
//
// Why: Go's HTTP/2 client and server give the window back (WINDOW_UPDATE
// frames, written and flushed at once) on every read of 4 KiB or more,
// and connect reads each message's bytes with reads of the message's
// size. A download of a thousand 4 KiB files was a thousand writes in the
// client and a thousand wake-ups of boxd's connection reader: a quarter
// of boxd's CPU in that download; an upload the same the other way.
// Reading through this buffer gives the window back once per buffer's
// worth instead. A read returns what has arrived, as before (no waiting
// for the buffer to fill), and data bigger than the buffer still goes
// straight to the caller.
const streamReadBytes = 64 << 10

var streamReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamReadBytes) }}

// bufferedBodies reads streamed answers (the Connect protocol's streaming
// content types) through a pooled buffer; unary answers are left as they
// are.
type bufferedBodies struct{ next http.RoundTripper }

func (b bufferedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err == nil && resp.Body != nil {
		if IsStream(resp.Header.Get("Content-Type")) {
			resp.Body = NewStreamBody(resp.Body)
		}
		resp.Body = lostBody{resp.Body}
	}
	return resp, err
}

// lostBody reports an answer cut off by the connection's end (boxd killed
// or restarted mid-call) as unavailable, the code for "try again when boxd
// is back". connect-go would call it invalid_argument ("protocol error:
// incomplete envelope") or unknown, as if boxd had sent a bad message;
// it passes a *connect.Error from the body through as it is.
type lostBody struct{ io.ReadCloser }

func (b lostBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
		err = connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s: %w", LostConnection, err))
	}
	return n, err
}

// LostConnection is how both clients (this one and rpc/lite) begin the
// message of an answer cut off by the connection's end.
const LostConnection = "connection to boxd lost mid-call"

// IsStream reports whether contentType is one of the Connect protocol's
// streaming content types or gRPC's (whose every call is a message stream).
func IsStream(contentType string) bool {
	return strings.HasPrefix(contentType, "application/connect+") || strings.HasPrefix(contentType, "application/grpc")
}

// NewStreamBody reads body through a pooled buffer of streamReadBytes,
// handed back at Close. boxd's server reads streamed requests through it.
func NewStreamBody(body io.ReadCloser) io.ReadCloser {
	br := streamReaders.Get().(*bufio.Reader)
	br.Reset(body)
	return &bufferedBody{r: br, body: body}
}

// bufferedBody hands its buffer back to the pool at Close. Close may come
// from another goroutine while a Read is blocked: it closes the body
// first, which ends that Read, and only then takes the buffer.
type bufferedBody struct {
	mu   sync.Mutex // held by Read, and by Close to take r
	r    *bufio.Reader
	body io.ReadCloser
}

var errBodyClosed = errors.New("read on a closed response body")

func (b *bufferedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r == nil {
		return 0, errBodyClosed
	}
	return b.r.Read(p)
}

func (b *bufferedBody) Close() error {
	err := b.body.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r != nil {
		b.r.Reset(nil)
		streamReaders.Put(b.r)
		b.r = nil
	}
	return err
}
