package apiwire

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// fileServer answers WriteFile, StatFile and ReadFile, and records the
// method and path of every request it gets, in order.
type fileServer struct {
	boxdv1connect.UnimplementedFileServiceHandler
	mu   sync.Mutex
	seen []string
}

func (s *fileServer) WriteFile(_ context.Context, st *connect.ClientStream[boxdv1.WriteFileRequest]) (*connect.Response[boxdv1.WriteFileResponse], error) {
	for st.Receive() {
	}
	return connect.NewResponse(&boxdv1.WriteFileResponse{}), st.Err()
}

func (s *fileServer) StatFile(context.Context, *connect.Request[boxdv1.StatFileRequest]) (*connect.Response[boxdv1.StatFileResponse], error) {
	return connect.NewResponse(&boxdv1.StatFileResponse{}), nil
}

func (s *fileServer) ReadFile(context.Context, *connect.Request[boxdv1.ReadFileRequest], *connect.ServerStream[boxdv1.ReadFileResponse]) error {
	return nil
}

func (s *fileServer) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, r.Method+" "+r.URL.Path)
}

func (s *fileServer) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := s.seen
	s.seen = nil
	return seen
}

// An upload waits for a small request first, so boxd's HTTP/2 settings
// (1 MiB frames) are known when its body starts; other calls do not pay
// that round trip.
func TestUploadIsPrecededByAWarmRequest(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fs := &fileServer{}
	mux := http.NewServeMux()
	path, h := boxdv1connect.NewFileServiceHandler(fs)
	mux.Handle(path, h)
	proto := new(http.Protocols)
	proto.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: proto, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.record(r)
		mux.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	hc := HTTPClient(sock)
	fc := boxdv1connect.NewFileServiceClient(hc, BaseURL, ClientOptions(hc)...)
	ctx := context.Background()
	const write = "POST /boxd.v1.FileService/WriteFile"
	for _, tc := range []struct {
		name string
		call func() error
		want []string
	}{
		{"upload on a fresh connection", func() error {
			st := fc.WriteFile(ctx)
			if err := st.Send(&boxdv1.WriteFileRequest{SandboxId: "sb", Path: "f", Data: []byte("x")}); err != nil {
				return err
			}
			_, err := st.CloseAndReceive()
			return err
		}, []string{"GET /", write}},
		{"upload again", func() error {
			st := fc.WriteFile(ctx)
			_, err := st.CloseAndReceive()
			return err
		}, []string{"GET /", write}},
		{"unary", func() error {
			_, err := fc.StatFile(ctx, connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: "sb", Path: "f"}))
			return err
		}, []string{"POST /boxd.v1.FileService/StatFile"}},
		{"server stream", func() error {
			st, err := fc.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: "sb", Path: "f"}))
			if err != nil {
				return err
			}
			for st.Receive() {
			}
			return st.Close()
		}, []string{"POST /boxd.v1.FileService/ReadFile"}},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := fs.take(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: server saw %q, want %q", tc.name, got, tc.want)
		}
	}
}
