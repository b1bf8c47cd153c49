package apiwire

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// serveThenDie answers each request with part of an answer (a streamed
// answer's first message, or half a unary one) and then cuts the
// connection, as a daemon killed mid-call does.
func serveThenDie(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	proto2 := new(http.Protocols)
	proto2.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: proto2,
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if strings.HasSuffix(r.URL.Path, "/ExecStream") {
				w.Header().Set("Content-Type", "application/connect+proto")
				w.Write([]byte{0, 0, 0, 0, 0}) // an empty message
			} else {
				w.Header().Set("Content-Type", "application/proto")
				w.Header().Set("Content-Length", "10")
				w.Write([]byte{0x0a, 8, 'x'})
			}
			w.(http.Flusher).Flush()
			mu.Lock()
			for _, c := range conns {
				c.Close()
			}
			mu.Unlock()
			<-r.Context().Done()
		})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestLostConnectionIsUnavailable: a connection cut mid-answer (boxd
// killed during the call) is unavailable, for streamed and unary calls
// alike, not connect-go's invalid_argument "incomplete envelope".
func TestLostConnectionIsUnavailable(t *testing.T) {
	sock := serveThenDie(t)
	hc := HTTPClient(sock)
	c := boxdv1connect.NewSandboxServiceClient(hc, BaseURL, ClientOptions(hc)...)
	ctx := context.Background()
	st, err := c.ExecStream(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: "a", Args: []string{"sleep", "5"}}))
	if err != nil {
		t.Fatal(err)
	}
	for st.Receive() {
	}
	check := func(what string, err error) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "connection to boxd lost") {
			t.Errorf("%s: %v (code %v), want unavailable: connection to boxd lost", what, err, connect.CodeOf(err))
		}
	}
	check("stream", st.Err())
	_, err = c.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: "a"}))
	check("unary", err)
}
