package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/boxd-dev/boxd/rpc/client"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// writeCounter counts the writes of the connections it accepts.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return writeCountedConn{c, &l.writes}, nil
}

type writeCountedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCountedConn) Write(p []byte) (int, error) { c.writes.Add(1); return c.Conn.Write(p) }

type uploadCounter struct {
	boxdv1connect.UnimplementedFileServiceHandler
	received atomic.Int64
}

func (u *uploadCounter) UploadFiles(_ context.Context, s *connect.ClientStream[boxdv1.UploadFilesRequest]) (*connect.Response[boxdv1.UploadFilesResponse], error) {
	for s.Receive() {
		u.received.Add(int64(len(s.Msg().Data)))
	}
	return connect.NewResponse(&boxdv1.UploadFilesResponse{}), s.Err()
}

// An upload of many small messages that has arrived ahead of the handler
// (a busy boxd) is read in big pieces: boxd gives the client its window
// back a few dozen times, where reading message by message wrote a window
// update per message.
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
	writes := map[bool]int64{}
	for _, buffered := range []bool{false, true} {
		sock := filepath.Join(t.TempDir(), "s.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		wc := &writeCounter{Listener: ln}
		svc := &uploadCounter{}
		mux := http.NewServeMux()
		mux.Handle(boxdv1connect.NewFileServiceHandler(svc, connect.WithCodec(chunkCodec)))
		var h http.Handler = mux
		if buffered {
			h = bufferStreams(mux)
		}
		proto2 := new(http.Protocols)
		proto2.SetUnencryptedHTTP2(true)
		srv := &http.Server{Handler: h, Protocols: proto2, HTTP2: serverHTTP2()}
		go srv.Serve(wc)
		// The whole upload in one request body, sent as fast as the
		// windows allow.
		req, _ := http.NewRequest(http.MethodPost, "http://boxd"+boxdv1connect.FileServiceUploadFilesProcedure, bytes.NewReader(body.Bytes()))
		req.Header.Set("Content-Type", "application/connect+proto")
		resp, err := (&http.Client{Transport: client.Transport(sock)}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		srv.Close()
		if got := svc.received.Load(); resp.StatusCode != http.StatusOK || got != messages*size {
			t.Fatalf("buffered %v: %s, the server received %d bytes", buffered, resp.Status, got)
		}
		writes[buffered] = wc.writes.Load()
	}
	t.Logf("boxd's writes during an upload of %d messages: %d reading message by message, %d with bufferStreams", messages, writes[false], writes[true])
	if writes[true] > 200 || writes[true]*4 > writes[false] {
		t.Errorf("bufferStreams: %d writes for %d messages (%d without)", writes[true], messages, writes[false])
	}
}
