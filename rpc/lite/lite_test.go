//go:build linux

package lite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// stubService answers ExecStream with what its test scripts, through
// connect-go itself, so the tests read what boxd's server really sends.
type stubService struct {
	boxdv1connect.UnimplementedSandboxServiceHandler
	got  chan *boxdv1.ExecRequest
	send func(*connect.ServerStream[boxdv1.ExecStreamResponse]) error
}

func (s *stubService) ExecStream(_ context.Context, req *connect.Request[boxdv1.ExecRequest], stream *connect.ServerStream[boxdv1.ExecStreamResponse]) error {
	s.got <- req.Msg
	return s.send(stream)
}

// serveStub serves svc on a Unix socket as boxd does (HTTP/1.1 and h2c) and
// returns the socket's path.
func serveStub(t *testing.T, svc *stubService) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "boxd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(boxdv1connect.NewSandboxServiceHandler(svc, connect.WithCompression("gzip", nil, nil)))
	proto := new(http.Protocols)
	proto.SetHTTP1(true)
	proto.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: proto}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return sock
}

func stdoutEv(s string) *boxdv1.ExecStreamResponse {
	return &boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Stdout{Stdout: []byte(s)}}
}

func stderrEv(s string) *boxdv1.ExecStreamResponse {
	return &boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Stderr{Stderr: []byte(s)}}
}

func resultEv(r *boxdv1.ExecResult) *boxdv1.ExecStreamResponse {
	return &boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Result{Result: r}}
}

// TestExecStreamAgainstConnect runs calls through a connect-go server: the
// request it decodes, the output, result and errors boxctl gets.
func TestExecStreamAgainstConnect(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 200<<10) // 3.2 MiB, many messages
	cases := []struct {
		name           string
		events         []*boxdv1.ExecStreamResponse
		err            error
		stdout, stderr string
		result         *Result
		wantErr        string
	}{
		{
			name: "output and exit code",
			events: []*boxdv1.ExecStreamResponse{stdoutEv("out\n"), stderrEv("err\n"), stdoutEv("more"),
				resultEv(&boxdv1.ExecResult{ExitCode: 3, StartedAt: "2026-01-01T00:00:00Z", UserCpuUsec: 1 << 40, MaxRssBytes: 5})},
			stdout: "out\nmore", stderr: "err\n", result: &Result{ExitCode: 3},
		},
		{
			name:   "signal, timeout, truncation",
			events: []*boxdv1.ExecStreamResponse{resultEv(&boxdv1.ExecResult{ExitCode: 124, Signal: "SIGKILL", TimedOut: true, Truncated: true, OomKilled: true})},
			result: &Result{ExitCode: 124, Signal: "SIGKILL", TimedOut: true, Truncated: true, OOMKilled: true},
		},
		{
			name:   "negative exit code",
			events: []*boxdv1.ExecStreamResponse{resultEv(&boxdv1.ExecResult{ExitCode: -1})},
			result: &Result{ExitCode: -1},
		},
		{
			name:   "binary output",
			events: []*boxdv1.ExecStreamResponse{stdoutEv("\x00\xff\xfe\"\\\n"), stderrEv("\x80"), resultEv(&boxdv1.ExecResult{})},
			stdout: "\x00\xff\xfe\"\\\n", stderr: "\x80", result: &Result{},
		},
		{
			name: "large output",
			events: func() []*boxdv1.ExecStreamResponse {
				var evs []*boxdv1.ExecStreamResponse
				for off := 0; off < len(big); off += 256 << 10 {
					evs = append(evs, stdoutEv(big[off:min(off+256<<10, len(big))]))
				}
				return append(evs, resultEv(&boxdv1.ExecResult{}))
			}(),
			stdout: big, result: &Result{},
		},
		{
			name:    "boxd's error",
			err:     connect.NewError(connect.CodeNotFound, errors.New("sandbox \"x<&>\u2028é\" not found")),
			wantErr: "not_found: sandbox \"x<&>\u2028é\" not found",
		},
		{
			name:    "error after output",
			events:  []*boxdv1.ExecStreamResponse{stdoutEv("partial")},
			err:     connect.NewError(connect.CodeInternal, errors.New("agent gone")),
			stdout:  "partial",
			wantErr: "internal: agent gone",
		},
		{
			name:   "no result",
			events: []*boxdv1.ExecStreamResponse{stdoutEv("x")},
			stdout: "x",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := &stubService{got: make(chan *boxdv1.ExecRequest, 1), send: func(s *connect.ServerStream[boxdv1.ExecStreamResponse]) error {
				for _, ev := range tc.events {
					if err := s.Send(ev); err != nil {
						return err
					}
				}
				return tc.err
			}}
			sock := serveStub(t, svc)
			req := &ExecRequest{SandboxID: "sb-1", Args: []string{"sh", "-c", "echo \"$A\"\n\t\\ ü"}, Env: []string{"A=1", "B=\x01"}, Workdir: "/w", Timeout: "5s"}
			c, err := Dial(sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var stdout, stderr bytes.Buffer
			res, err := c.ExecStream(req, &stdout, &stderr)
			got := <-svc.got
			want := &boxdv1.ExecRequest{SandboxId: req.SandboxID, Args: req.Args, Env: req.Env, Workdir: req.Workdir, Timeout: req.Timeout}
			if !proto.Equal(got, want) {
				t.Errorf("boxd got %v, want %v", got, want)
			}
			if tc.wantErr != "" {
				var e *Error
				if !errors.As(err, &e) || e.Error() != tc.wantErr {
					t.Fatalf("error %v (%T), want %q", err, err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Errorf("stdout %d bytes %.40q, stderr %q; want %d bytes %.40q, %q", stdout.Len(), stdout.String(), stderr.String(), len(tc.stdout), tc.stdout, tc.stderr)
			}
			if (res == nil) != (tc.result == nil) || res != nil && *res != *tc.result {
				t.Errorf("result %+v, want %+v", res, tc.result)
			}
		})
	}
}

// TestHTTPRequest: the request is one well-formed HTTP/1.1 POST whose body
// is one Connect envelope of protobuf JSON.
func TestHTTPRequest(t *testing.T) {
	req := &ExecRequest{SandboxID: "id", Args: []string{"a\"b", "\x7f", "€"}}
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(AppendHTTPRequest(nil, req))))
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "POST" || r.URL.Path != Path || r.Header.Get("Content-Type") != "application/connect+json" {
		t.Fatalf("request %s %s %v", r.Method, r.URL, r.Header)
	}
	body, _ := io.ReadAll(r.Body)
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		t.Fatalf("body %q is not one envelope", body)
	}
	var msg boxdv1.ExecRequest
	if err := protojson.Unmarshal(body[5:], &msg); err != nil {
		t.Fatal(err)
	}
	if msg.SandboxId != "id" || strings.Join(msg.Args, "|") != "a\"b|\x7f|€" || msg.Env != nil || msg.Workdir != "" {
		t.Fatalf("decoded %v", &msg)
	}
}

// FuzzRequestJSON: whatever the strings, protojson reads back the request.
func FuzzRequestJSON(f *testing.F) {
	f.Add("id", "sh", "-c", "A=\x00\"\\\u2028", "/w", "1s")
	f.Fuzz(func(t *testing.T, id, a0, a1, env, workdir, timeout string) {
		for _, s := range []string{id, a0, a1, env, workdir, timeout} {
			if !validUTF8(s) {
				return // boxctl hands these to the full CLI
			}
		}
		req := &ExecRequest{SandboxID: id, Args: []string{a0, a1}, Env: []string{env}, Workdir: workdir, Timeout: timeout}
		var msg boxdv1.ExecRequest
		if err := protojson.Unmarshal(AppendRequestJSON(nil, req), &msg); err != nil {
			t.Fatal(err)
		}
		want := &boxdv1.ExecRequest{SandboxId: id, Args: req.Args, Env: req.Env, Workdir: workdir, Timeout: timeout}
		if !proto.Equal(&msg, want) {
			t.Fatalf("got %v, want %v", &msg, want)
		}
	})
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "") == s }

// TestDialFullBacklog: with boxd's backlog full, Dial fails at once (as Go's
// net package does, so the full CLI reports the same) instead of waiting.
func TestDialFullBacklog(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		c, err := Dial(sock)
		if err != nil {
			var ns *NotServedError
			if !errors.As(err, &ns) || !errors.Is(err, syscall.EAGAIN) {
				t.Fatalf("dial %d: %v, want NotServedError with EAGAIN", i, err)
			}
			return
		}
		defer c.Close()
		if i > 100 {
			t.Fatal("the backlog never filled")
		}
	}
}
