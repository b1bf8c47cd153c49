package apiwire

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

const (
	smallMessages = 1000
	smallBytes    = 4 << 10
)

// serveSmallDownload answers any request with a Connect stream of many
// small DownloadFiles data messages, flushed in batches of 64 as boxd's
// server batches a download's (rpc/coalesce.go): big DATA frames, each
// holding many messages.
func serveSmallDownload(t *testing.T) string {
	t.Helper()
	msg, err := proto.Marshal(&boxdv1.DownloadFilesResponse{Event: &boxdv1.DownloadFilesResponse_Data{Data: make([]byte, smallBytes)}})
	if err != nil {
		t.Fatal(err)
	}
	env := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(env[1:5], uint32(len(msg)))
	copy(env[5:], msg)
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	proto2 := new(http.Protocols)
	proto2.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: proto2, HTTP2: &http.HTTP2Config{MaxReadFrameSize: MaxFrameBytes,
		MaxReceiveBufferPerStream: StreamWindowBytes, MaxReceiveBufferPerConnection: ConnWindowBytes},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/connect+proto")
			for i := range smallMessages {
				w.Write(env)
				if i%64 == 63 {
					w.(http.Flusher).Flush()
				}
			}
			w.Write([]byte{2, 0, 0, 0, 2, '{', '}'}) // end of stream, no error
		})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) { c.writes.Add(1); return c.Conn.Write(p) }

// A download of many small messages gives boxd its window back once per
// buffer's worth: a few dozen writes, where reading each message straight
// from the transport wrote (and woke boxd) once per message.
func TestStreamedAnswersGiveTheWindowBackInBigPieces(t *testing.T) {
	sock := serveSmallDownload(t)
	writes := map[bool]int64{}
	for _, buffered := range []bool{false, true} {
		var n atomic.Int64
		tr := Transport(sock)
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", sock)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &n}, nil
		}
		hc := &http.Client{Transport: tr}
		if buffered {
			hc.Transport = bufferedBodies{tr}
		}
		fc := boxdv1connect.NewFileServiceClient(hc, BaseURL, ClientOptions(hc)...)
		s, err := fc.DownloadFiles(context.Background(), connect.NewRequest(&boxdv1.DownloadFilesRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for s.Receive() {
			got += len(s.Msg().GetData())
		}
		if err := s.Err(); err != nil || got != smallMessages*smallBytes {
			t.Fatalf("buffered %v: %d bytes, %v", buffered, got, err)
		}
		s.Close()
		writes[buffered] = n.Load()
	}
	t.Logf("client writes during a download of %d messages: %d reading from the transport, %d through bufferedBodies", smallMessages, writes[false], writes[true])
	if writes[true] > 200 || writes[true]*4 > writes[false] {
		t.Errorf("bufferedBodies: %d writes for %d messages (%d without)", writes[true], smallMessages, writes[false])
	}
}

// Unary answers are not wrapped; streamed ones are, and IsStream knows
// both protocols' streaming types.
func TestIsStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/connect+proto": true, "application/connect+json": true, "application/grpc": true,
		"application/grpc+proto": true, "application/proto": false, "application/json": false, "": false,
	} {
		if IsStream(ct) != want {
			t.Errorf("IsStream(%q) = %v", ct, !want)
		}
	}
}

// A body closed while a read waits on it ends that read; the buffer goes
// back to the pool only then, and a later read fails instead of touching
// it.
func TestStreamBodyCloseDuringRead(t *testing.T) {
	pr, pw := net.Pipe()
	defer pw.Close()
	body := NewStreamBody(pr)
	done := make(chan error, 1)
	go func() {
		_, err := body.Read(make([]byte, 16))
		done <- err
	}()
	if err := body.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Error("a read blocked at Close returned no error")
	}
	if _, err := body.Read(make([]byte, 16)); err != errBodyClosed {
		t.Errorf("a read after Close: %v", err)
	}
}
