package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// frameCounter counts the WINDOW_UPDATE frames the connections it
// accepts write (the server's side of HTTP/2 starts with its own frames,
// no preface), and the bytes they have read.
type frameCounter struct {
	net.Listener
	read atomic.Int64

	mu            sync.Mutex
	hdr           []byte
	skip          int
	windowUpdates int
}

func (l *frameCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return frameCountedConn{c, l}, nil
}

func (l *frameCounter) wrote(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(p) > 0 {
		if l.skip > 0 {
			n := min(l.skip, len(p))
			l.skip -= n
			p = p[n:]
			continue
		}
		n := min(9-len(l.hdr), len(p))
		l.hdr = append(l.hdr, p[:n]...)
		p = p[n:]
		if len(l.hdr) == 9 {
			if l.hdr[3] == 0x8 { // WINDOW_UPDATE
				l.windowUpdates++
			}
			l.skip = int(l.hdr[0])<<16 | int(l.hdr[1])<<8 | int(l.hdr[2])
			l.hdr = l.hdr[:0]
		}
	}
}

func (l *frameCounter) updates() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.windowUpdates
}

type frameCountedConn struct {
	net.Conn
	l *frameCounter
}

func (c frameCountedConn) Write(p []byte) (int, error) { c.l.wrote(p); return c.Conn.Write(p) }

func (c frameCountedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.read.Add(int64(n))
	return n, err
}

// uploadCounter reads an upload once all of it has reached the server (as
// when boxd is busier than its client), counting the bytes.
type uploadCounter struct {
	boxdv1connect.UnimplementedFileServiceHandler
	arrived  func() bool
	received atomic.Int64
}

func (u *uploadCounter) UploadFiles(ctx context.Context, s *connect.ClientStream[boxdv1.UploadFilesRequest]) (*connect.Response[boxdv1.UploadFilesResponse], error) {
	for !u.arrived() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	for s.Receive() {
		u.received.Add(int64(len(s.Msg().Data)))
	}
	return connect.NewResponse(&boxdv1.UploadFilesResponse{}), s.Err()
}

// An upload of many small messages that has arrived ahead of the handler
// (a busy boxd) is read in big pieces: boxd gives the client its window
// back a few dozen times, where reading message by message sent a window
// update (for the stream and for the connection) per message. Frames are
// counted, not writes: Go's server coalesces frames into one write when it
// falls behind.
func TestStreamedRequestsGiveTheWindowBackInBigPieces(t *testing.T) {
	const messages, size = 1000, 4 << 10
	msg, err := proto.Marshal(&boxdv1.UploadFilesRequest{Data: make([]byte, size)})
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	for range messages {
		var prefix [5]byte
		binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
		body.Write(prefix[:])
		body.Write(msg)
	}
	updates := map[bool]int{}
	for _, buffered := range []bool{false, true} {
		sock := filepath.Join(t.TempDir(), "s.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		fc := &frameCounter{Listener: ln}
		svc := &uploadCounter{arrived: func() bool { return fc.read.Load() >= int64(body.Len()) }}
		mux := http.NewServeMux()
		mux.Handle(boxdv1connect.NewFileServiceHandler(svc, connect.WithCodec(chunkCodec)))
		var h http.Handler = mux
		if buffered {
			h = bufferStreams(mux)
		}
		proto2 := new(http.Protocols)
		proto2.SetUnencryptedHTTP2(true)
		srv := &http.Server{Handler: h, Protocols: proto2, HTTP2: serverHTTP2()}
		go srv.Serve(fc)
		// The whole upload in one request body, sent as fast as the
		// windows allow.
		req, _ := http.NewRequest(http.MethodPost, "http://boxd"+boxdv1connect.FileServiceUploadFilesProcedure, bytes.NewReader(body.Bytes()))
		req.Header.Set("Content-Type", "application/connect+proto")
		resp, err := (&http.Client{Transport: apiwire.Transport(sock)}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		srv.Close()
		if got := svc.received.Load(); resp.StatusCode != http.StatusOK || got != messages*size {
			t.Fatalf("buffered %v: %s, the server received %d bytes", buffered, resp.Status, got)
		}
		updates[buffered] = fc.updates()
	}
	t.Logf("boxd's window updates during an upload of %d messages: %d reading message by message, %d with bufferStreams", messages, updates[false], updates[true])
	if updates[false] < messages || updates[true] > 300 {
		t.Errorf("bufferStreams: %d window updates for %d messages (%d without)", updates[true], messages, updates[false])
	}
}
