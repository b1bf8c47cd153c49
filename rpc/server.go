//go:build linux

// Package rpc serves boxd's API (rpc/proto/boxd/v1/boxd.proto) over a Unix
// socket with ConnectRPC, so gRPC clients, boxctl and curl with JSON all
// reach the same handlers. What the client end shares with it (limits,
// transport settings, codec) is in rpc/apiwire; the clients are
// internal/rpcclient and the Go SDK.
//
// Files by role: server.go holds the Server and the SandboxService
// handlers that run commands and copy trees; serve.go the HTTP side (the
// services, handler options, Serve and its drain, callers' credentials);
// each server_*.go one service or group of calls (sandboxes, images,
// files, processes, registry, pool, ports, commit and fork, build, tag;
// server_ops.go pause, stats and events).
package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/registry"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
	"github.com/boxd-dev/boxd/snapshot"
)

// chunkSize is the payload of one streamed data message.
const chunkSize = apiwire.StreamChunkBytes

// Server implements boxdv1connect.SandboxServiceHandler on a runtime.Manager.
type Server struct {
	Manager *runtime.Manager
	Images  *snapshot.Store
	Log     *slog.Logger
	// Events is the daemon's event log (EventService); nil: none.
	Events *events.Log
	// Registry pulls and pushes (RegistryService, create's pull); nil
	// answers those calls unimplemented.
	Registry *registry.Registry
	// DefaultImage is the image a create that names none uses (for its
	// pull field).
	DefaultImage string

	// MaxConns caps the API connections open at once (0: no cap); one
	// over it gets resource_exhausted naming max-connections.
	MaxConns int
	// IdleTimeout closes a connection with no call in progress for this
	// long (0: never); a call in progress, however quiet, is not cut.
	IdleTimeout time.Duration

	// AdminGIDs are the --admin-group whose members, like root, see and
	// manage every sandbox and may change images; empty: root only.
	AdminGIDs []int
	// Audit gets a line for every mutating call; nil: none.
	Audit *audit.Log
	// DrainTimeout is how long calls in flight may go on after Serve's
	// context ends; new calls get unavailable meanwhile.
	DrainTimeout time.Duration
	// Unchecked, if set, is served too, with the ownership check off
	// (--bench-unchecked-socket: a benchmark aid, see docs/multi-user.md).
	Unchecked net.Listener
	// Remote are the TCP listeners (--listen tcp://), whose callers
	// present a token of Tokens.
	Remote []RemoteListener
	// Tokens are the bearer tokens (TokenService); nil: none, and every
	// call on a TCP listener is unauthenticated.
	Tokens *TokenStore
	// CertMap names the callers that present a client certificate
	// (--client-cert-map) on a TCP listener; nil: certificates name no
	// one, and every call there needs a token.
	CertMap *CertMap
	// OwnerAsserter is the one client certificate that may assert an
	// owner on a caller's behalf (--owner-asserter, a fleet's gateway);
	// nil: none may.
	OwnerAsserter *OwnerAsserter
	// Metrics, if set, counts calls (MetricsHandler serves them).
	Metrics *Metrics

	health   *grpchealth.StaticChecker // set by Handler; NOT_SERVING while draining
	gateOnce sync.Once
	g        *gate
}

// theGate is the one gate all services share, so a drain sees every call.
func (s *Server) theGate() *gate {
	s.gateOnce.Do(func() { s.g = newGate(s) })
	return s.g
}

var _ boxdv1connect.SandboxServiceHandler = (*Server)(nil)

func execRequest(m *boxdv1.ExecRequest) (runtime.ExecRequest, error) {
	timeout, err := runtime.ParseTimeout("timeout", m.Timeout)
	if err != nil {
		return runtime.ExecRequest{}, err
	}
	return runtime.ExecRequest{Args: m.Args, Env: m.Env, Dir: m.Workdir, Timeout: timeout, Stdin: m.Stdin, OutputLimit: m.OutputLimit,
		User: m.User, Combined: m.CombinedOutput}, nil
}

func execResult(r runtime.ExecResult) *boxdv1.ExecResult {
	return &boxdv1.ExecResult{
		ExitCode: int32(r.ExitCode), Signal: r.Signal, TimedOut: r.TimedOut, Truncated: r.Truncated,
		StartedAt: ts(r.Started), EndedAt: ts(r.Ended),
		UserCpuUsec: r.UserCPU.Microseconds(), SystemCpuUsec: r.SystemCPU.Microseconds(), MaxRssBytes: r.MaxRSS,
		Pid: int64(r.PID), OomKilled: r.OOMKilled, ProcessUsec: max(r.Lifetime.Microseconds(), 0),
	}
}

// Exec buffers the output; the init's output cap bounds the buffers.
func (s *Server) Exec(ctx context.Context, req *connect.Request[boxdv1.ExecRequest]) (*connect.Response[boxdv1.ExecResponse], error) {
	// A unary answer must fit in one message: the output cap (the
	// request's, else the sandbox's default) is held below it.
	var stdout, stderr capped
	stdout.max, stderr.max = MaxMessageBytes/2, MaxMessageBytes/2
	res, err := s.execOutput(ctx, req.Msg, &stdout, &stderr, runtime.OutputAtMost(MaxMessageBytes/2))
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ExecResponse{Stdout: stdout.b, Stderr: stderr.b, Result: execResult(res), Usage: usage(res)}
	if req.Msg.CombinedOutput {
		// The init sent everything as stdout, in the order written.
		out.Result.Output, out.Stdout, out.Stderr = stdout.b, nil, nil
	}
	return connect.NewResponse(out), nil
}

// execOutput runs an ExecRequest through the one exec call and copies its
// output to stdout and stderr: Exec and ExecStream differ only in where
// the output goes.
func (s *Server) execOutput(ctx context.Context, m *boxdv1.ExecRequest, stdout, stderr io.Writer, opts ...runtime.ExecOption) (runtime.ExecResult, error) {
	er, err := execRequest(m)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	if m.Resume {
		ctx = runtime.WithResume(ctx)
	}
	ps, err := s.Manager.ExecProcess(ctx, m.SandboxId, wire.ProcessSpec{ExecRequest: er}, append(opts, runtime.WithoutControls())...)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	defer ps.Close()
	return ps.Output(stdout, stderr)
}

// capped is a buffer that keeps at most max bytes, as a guard in depth
// behind the init's own output cap, which the init may not honour.
type capped struct {
	b   []byte
	max int64
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - int64(len(c.b)); room > 0 {
		if int64(len(p)) > room {
			c.b = append(c.b, p[:room]...)
		} else {
			c.b = append(c.b, p...)
		}
	}
	return len(p), nil
}

// streamWriter sends each write as one stream message; mu serialises the
// stdout and stderr writers on one stream.
type streamWriter struct {
	mu     *sync.Mutex
	stream *connect.ServerStream[boxdv1.ExecStreamResponse]
	stderr bool
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for off := 0; off < len(p); off += chunkSize {
		end := min(off+chunkSize, len(p))
		msg := &boxdv1.ExecStreamResponse{}
		b := append([]byte(nil), p[off:end]...)
		if w.stderr {
			msg.Event = &boxdv1.ExecStreamResponse_Stderr{Stderr: b}
		} else {
			msg.Event = &boxdv1.ExecStreamResponse_Stdout{Stdout: b}
		}
		if err := w.stream.Send(msg); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func (s *Server) ExecStream(ctx context.Context, req *connect.Request[boxdv1.ExecRequest], stream *connect.ServerStream[boxdv1.ExecStreamResponse]) error {
	var mu sync.Mutex
	res, err := s.execOutput(ctx, req.Msg, &streamWriter{mu: &mu, stream: stream}, &streamWriter{mu: &mu, stream: stream, stderr: true})
	if err != nil {
		return ToConnect(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return stream.Send(&boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Result{Result: execResult(res)}, Usage: usage(res)})
}

// streamReader turns a client stream of data messages into an io.Reader;
// first holds the data of the message that carried the metadata.
type streamReader[T any] struct {
	recv  func() (bool, error)
	msg   func() *T
	data  func(*T) []byte
	buf   []byte
	done  bool
	first []byte
}

func (r *streamReader[T]) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.first != nil {
			r.buf, r.first = r.first, nil
			continue
		}
		if r.done {
			return 0, io.EOF
		}
		ok, err := r.recv()
		if err != nil {
			return 0, err
		}
		if !ok {
			r.done = true
			return 0, io.EOF
		}
		r.buf = r.data(r.msg())
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (s *Server) CopyIn(ctx context.Context, stream *connect.ClientStream[boxdv1.CopyInRequest]) (*connect.Response[boxdv1.CopyInResponse], error) {
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return nil, ToConnect(err)
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("copy in: empty request stream (the first message must name sandbox_id and path)"))
	}
	first := stream.Msg()
	if first.SandboxId == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("sandbox_id: empty in the first message"))
	}
	// The messages' data goes to the init as it is, and their buffers back
	// to the codec's pool (messageChunks).
	r := &messageChunks{first: first.Data, recv: func() ([]byte, bool, error) {
		if !stream.Receive() {
			return nil, false, streamEnd(ctx, stream.Err())
		}
		return stream.Msg().Data, true, nil
	}}
	if err := s.Manager.CopyIn(ctx, first.SandboxId, runtime.CopyIn{Dest: first.Path, Tar: r}); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CopyInResponse{}), nil
}

// copyOutWriter sends what the init's tar frames bring as messages of up
// to apiwire.ChunkBytes. Send marshals before it returns, so the frame's
// buffer goes into the message without a copy.
type copyOutWriter struct {
	stream *connect.ServerStream[boxdv1.CopyOutResponse]
	msg    boxdv1.CopyOutResponse
}

func (w *copyOutWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += apiwire.ChunkBytes {
		w.msg.Data = p[off:min(off+apiwire.ChunkBytes, len(p))]
		err := w.stream.Send(&w.msg)
		w.msg.Data = nil
		if err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func (s *Server) CopyOut(ctx context.Context, req *connect.Request[boxdv1.CopyOutRequest], stream *connect.ServerStream[boxdv1.CopyOutResponse]) error {
	return ToConnect(s.Manager.CopyOut(ctx, req.Msg.SandboxId, runtime.CopyOut{Path: req.Msg.Path, Tar: &copyOutWriter{stream: stream}}))
}

// StatPath is FileService.StatFile's stat, as root (the init's own
// identity, which StatPath always had) and without following a final
// symlink, in StatPath's shape.
func (s *Server) StatPath(ctx context.Context, req *connect.Request[boxdv1.StatPathRequest]) (*connect.Response[boxdv1.StatPathResponse], error) {
	fi, err := s.Manager.StatFile(ctx, req.Msg.SandboxId, wire.FileStatArgs{Path: req.Msg.Path, User: statPathUser})
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(statResponse(fi)), nil
}

// statPathUser is who StatPath looks as: root, whoever the sandbox's
// default user is.
const statPathUser = "0"

func statResponse(fi wire.FileStat) *boxdv1.StatPathResponse {
	return &boxdv1.StatPathResponse{Name: fi.Name, Size: fi.Size, Mode: fi.Mode & 0o777, IsDir: fi.Type == wire.FileTypeDir,
		Mtime: ts(fi.Mtime), LinkTarget: fi.LinkTarget}
}
