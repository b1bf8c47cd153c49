//go:build linux

// Package rpc serves boxd's API (rpc/proto/boxd/v1/boxd.proto) over a Unix
// socket with ConnectRPC, so gRPC clients, boxctl and curl with JSON all
// reach the same handlers, and holds the client side used by boxctl.
package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/registry"
	"github.com/boxd-dev/boxd/rpc/client"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
	"github.com/boxd-dev/boxd/snapshot"
)

// chunkSize is the payload of one streamed data message.
const chunkSize = 256 << 10

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

// Handler returns the HTTP handler serving the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(boxdv1connect.NewSandboxServiceHandler(s, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewFileServiceHandler(&fileServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewProcessServiceHandler(&processServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewEventServiceHandler(&eventServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewRegistryServiceHandler(&registryServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewPoolServiceHandler(&poolServer{s}, s.handlerOptions()...))
	s.describe(mux)
	return coalesceBulk(bufferStreams(mux))
}

// APIServices are the services boxd serves, as gRPC names them.
var APIServices = []string{
	boxdv1connect.SandboxServiceName,
	boxdv1connect.FileServiceName,
	boxdv1connect.ProcessServiceName,
	boxdv1connect.EventServiceName,
	boxdv1connect.RegistryServiceName,
	boxdv1connect.PoolServiceName,
}

// describe adds what lets a client that has no copy of rpc/proto find its
// way: gRPC server reflection (v1 and the v1alpha that older grpcurl and
// grpc tools still ask for) listing and describing every service, and the
// standard health service (grpc.health.v1) that probes and load balancers
// speak. Both go through the same mux as the API, so the connection cap
// and the caller's credentials apply to them as to any call.
func (s *Server) describe(mux *http.ServeMux) {
	names := append(append([]string(nil), APIServices...),
		grpchealth.HealthV1ServiceName,
		grpcreflect.ReflectV1ServiceName,
		grpcreflect.ReflectV1AlphaServiceName,
	)
	opts := []connect.HandlerOption{
		connect.WithReadMaxBytes(MaxMessageBytes),
		connect.WithSendMaxBytes(MaxMessageBytes),
		connect.WithInterceptors(s.logInterceptor()),
	}
	reflector := grpcreflect.NewStaticReflector(names...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, opts...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, opts...))
	// Every service answers SERVING for as long as boxd accepts calls: boxd
	// listens only once its manager has recovered, and a daemon that is
	// gone answers nothing, which a probe reads as not serving.
	s.health = grpchealth.NewStaticChecker(APIServices...)
	mux.Handle(grpchealth.NewHandler(s.health, opts...))
}

// handlerOptions are shared by every service: bounded messages, failures
// logged with the caller, and no gzip, which on a local socket costs far
// more CPU than it saves (file data, tar streams and output alike).
func (s *Server) handlerOptions() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithReadMaxBytes(MaxMessageBytes),
		connect.WithSendMaxBytes(MaxMessageBytes),
		connect.WithInterceptors(s.logInterceptor(), s.theGate()),
		connect.WithCompression("gzip", nil, nil),
		connect.WithCodec(chunkCodec),
	}
}

// Peer is the identity of the process on the other end of the socket, read
// with SO_PEERCRED when the connection is accepted.
type Peer struct {
	PID, UID, GID int32
	// Groups are the supplementary groups the peer had when it connected
	// (SO_PEERGROUPS); nil if the kernel could not say.
	Groups []uint32
}

type peerKey struct{}

// PeerFrom returns the caller's identity, if the request came over a Unix
// socket.
func PeerFrom(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// Serve serves the API on ln until ctx ends, then drains for up to 5 s.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	proto := new(http.Protocols)
	proto.SetHTTP1(true)
	proto.SetUnencryptedHTTP2(true)
	// A connection that sends nothing is closed after the header
	// timeout, and one whose calls are over after the idle timeout (HTTP/2
	// counts a connection idle only while no stream is open).
	headerTimeout := 10 * time.Second
	if s.IdleTimeout > 0 {
		headerTimeout = min(headerTimeout, s.IdleTimeout)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		Protocols:         proto,
		HTTP2:             serverHTTP2(),
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       s.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ConnContext:       s.callerContext,
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
	}
	if s.MaxConns > 0 {
		ll := newLimitListener(ln, s.MaxConns, s.Log)
		defer ll.Close()
		ln = ll
		go ll.serveRefusals(proto)
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	if s.Unchecked != nil {
		go func() { errc <- srv.Serve(uncheckedListener{s.Unchecked}) }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		// Probes see the drain before the socket goes away. The socket
		// stays open while the calls in flight finish, so a new call is
		// answered unavailable rather than finding no socket.
		for _, name := range append([]string{""}, APIServices...) {
			s.health.SetStatus(name, grpchealth.StatusNotServing)
		}
		s.Log.Info("draining: new calls are refused", "grace", s.DrainTimeout)
		if left := s.theGate().drain(s.DrainTimeout); left > 0 {
			s.Log.Warn("drain grace over; cutting the calls still running", "calls", left)
		}
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
		return nil
	}
}

// logInterceptor logs each call that fails with who made it; successes of
// hot calls are not logged to keep exec cheap.
func (s *Server) logInterceptor() connect.Interceptor {
	return &interceptor{log: s.Log}
}

type interceptor struct{ log *slog.Logger }

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		i.record(ctx, req.Spec().Procedure, err)
		return resp, err
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		i.record(ctx, conn.Spec().Procedure, err)
		return err
	}
}

func (i *interceptor) record(ctx context.Context, proc string, err error) {
	if err == nil {
		return
	}
	p, _ := PeerFrom(ctx)
	i.log.Info("call failed", "procedure", proc, "code", connect.CodeOf(err).String(), "err", err, "peer_uid", p.UID, "peer_pid", p.PID)
}

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func toProto(sb *runtime.Sandbox) *boxdv1.Sandbox {
	u := usageProto(sb.Usage)
	var idleTimeout, onIdle, lastActivity string
	if sb.Idle != nil {
		idleTimeout, onIdle, lastActivity = sb.Idle.Timeout.String(), sb.Idle.Action, ts(sb.Idle.LastActivity)
	}
	t := sb.Tunables
	var tmpfs []*boxdv1.TmpfsMount
	for _, m := range t.Tmpfs {
		tmpfs = append(tmpfs, &boxdv1.TmpfsMount{Path: m.Path, SizeBytes: m.SizeBytes})
	}
	execTimeout := ""
	if t.ExecTimeout > 0 {
		execTimeout = t.ExecTimeout.String()
	}
	hostname := t.Hostname
	if hostname == "" {
		hostname = sb.ID
	}
	return &boxdv1.Sandbox{
		IdleTimeout: idleTimeout, OnIdle: onIdle, LastActivityAt: lastActivity,
		PausedAt: ts(sb.PausedAt), PauseReason: sb.PauseReason,
		User: sb.User, Tmpfs: tmpfs, Hostname: hostname, CpuWeight: t.CPUWeight, MemoryLowBytes: t.MemoryLow,
		ExecTimeout: execTimeout, OutputLimit: t.OutputLimit, StoppedAt: ts(sb.StoppedAt),
		Ulimits: &boxdv1.Ulimits{Nofile: t.Ulimits.NoFile, Nproc: t.Ulimits.NProc, CpuSeconds: t.Ulimits.CPU, FsizeBytes: t.Ulimits.FSize},
		Usage:   u,
		Id:      sb.ID, Name: sb.Name, Image: sb.Image, State: sb.State,
		MemoryBytes: sb.Limits.MemoryBytes, Cpus: sb.Limits.CPUs, Pids: sb.Limits.Pids,
		DiskBytes: sb.Limits.DiskBytes, DiskUsedBytes: sb.DiskUsedBytes,
		Env: sb.Env, Workdir: sb.Workdir, Labels: sb.Labels,
		CreatedAt: ts(sb.CreatedAt), ExpiresAt: ts(sb.ExpiresAt), InitPid: int64(sb.InitPID),
		InitRestarts: uint32(sb.Restarts.Count), LastRestartAt: ts(sb.Restarts.LastAt),
		LastRestartReason: sb.Restarts.LastReason, RestartRefused: sb.Restarts.Refused,
		Network: netToProto(sb.Network),
		Ports:   portsProto(sb.Ports),
		Runtime: sb.Runtime.Name, RuntimeVersion: sb.Runtime.Version, RuntimeAdvisories: sb.Runtime.Advisories,
		OwnerUid: sb.OwnerUID, Owner: userName(sb.OwnerUID),
		Security: &boxdv1.Security{
			Network:        sb.Network != nil && sb.Network.Mode == "egress",
			ReadOnlyRootfs: t.ReadOnly,
			Capabilities:   runtime.Capabilities(),
			Seccomp:        "containerd default profile plus boxd's denials (oci.DeniedSyscalls)",
			UidMap:         sb.UIDMap,
		},
	}
}

func (s *Server) CreateSandbox(ctx context.Context, req *connect.Request[boxdv1.CreateSandboxRequest]) (*connect.Response[boxdv1.CreateSandboxResponse], error) {
	m := req.Msg
	if err := s.pullForCreate(ctx, m); err != nil {
		return nil, ToConnect(err)
	}
	cr := runtime.CreateRequest{Image: m.Image, Env: m.Env, Workdir: m.Workdir, Labels: m.Labels, Name: m.Name, TTL: m.Ttl, Publish: portSpecs(m.Publish),
		IdleTimeout: m.IdleTimeout, OnIdle: m.OnIdle,
		User: m.User, Replace: m.Replace, Cold: m.Cold, Runtime: m.Runtime,
		Tunables: runtime.TunablesRequest{
			ReadOnly: m.ReadOnlyRootfs, Tmpfs: m.Tmpfs, Ulimits: m.Ulimits, Hostname: m.Hostname, CPUWeight: m.CpuWeight,
			MemoryLow: m.MemoryLow, ExecTimeout: m.ExecTimeout, OutputLimit: m.OutputLimit,
		},
	}
	if n := m.Network; n != nil {
		cr.Network, cr.Allow = n.Mode, n.Allow
	}
	if l := m.Limits; l != nil {
		cr.Memory, cr.CPUs, cr.Pids, cr.Disk = l.Memory, l.Cpus, l.Pids, l.Disk
	}
	sb, err := s.Manager.Create(ctx, cr)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CreateSandboxResponse{Sandbox: toProto(sb)}), nil
}

func (s *Server) ListSandboxes(ctx context.Context, req *connect.Request[boxdv1.ListSandboxesRequest]) (*connect.Response[boxdv1.ListSandboxesResponse], error) {
	f := runtime.ListFilter{Labels: req.Msg.Labels, All: req.Msg.All}
	if o := req.Msg.Owner; o != "" {
		uid, err := lookupOwner(o)
		if err != nil {
			return nil, ToConnect(err)
		}
		f.Owner = &uid
	}
	sbs, err := s.Manager.ListFiltered(ctx, f)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ListSandboxesResponse{}
	for _, sb := range sbs {
		out.Sandboxes = append(out.Sandboxes, toProto(sb))
	}
	return connect.NewResponse(out), nil
}

func (s *Server) GetSandbox(ctx context.Context, req *connect.Request[boxdv1.GetSandboxRequest]) (*connect.Response[boxdv1.GetSandboxResponse], error) {
	sb, err := s.Manager.Get(ctx, req.Msg.Id)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.GetSandboxResponse{Sandbox: toProto(sb)}), nil
}

func netToProto(n *runtime.NetworkInfo) *boxdv1.NetworkStatus {
	if n == nil {
		return &boxdv1.NetworkStatus{Mode: "none"}
	}
	return &boxdv1.NetworkStatus{Mode: n.Mode, Allow: n.Allow, Address: n.Addr, Gateway: n.Gateway, Dns: n.DNS}
}

func (s *Server) UpdateNetwork(ctx context.Context, req *connect.Request[boxdv1.UpdateNetworkRequest]) (*connect.Response[boxdv1.UpdateNetworkResponse], error) {
	n, err := s.Manager.ChangeNetwork(ctx, req.Msg.SandboxId, req.Msg.Allow, req.Msg.Deny)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.UpdateNetworkResponse{Network: netToProto(n)}), nil
}

func (s *Server) DeleteSandbox(ctx context.Context, req *connect.Request[boxdv1.DeleteSandboxRequest]) (*connect.Response[boxdv1.DeleteSandboxResponse], error) {
	grace, err := runtime.ParseGrace("timeout", req.Msg.Timeout)
	if err != nil {
		return nil, ToConnect(err)
	}
	if req.Msg.Force {
		grace = 0
	}
	del := s.Manager.DeleteGraceful
	if req.Msg.Background {
		del = s.Manager.DeleteBackground
	}
	if err := del(ctx, req.Msg.Id, grace); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.DeleteSandboxResponse{}), nil
}

func (s *Server) UpdateSandbox(ctx context.Context, req *connect.Request[boxdv1.UpdateSandboxRequest]) (*connect.Response[boxdv1.UpdateSandboxResponse], error) {
	m := req.Msg
	ur := runtime.UpdateRequest{TTL: m.Ttl, Extend: m.Extend, Env: m.Env, Workdir: m.Workdir}
	if l := m.Limits; l != nil {
		ur.Memory, ur.CPUs, ur.Pids = l.Memory, l.Cpus, l.Pids
	}
	sb, err := s.Manager.Update(ctx, m.SandboxId, ur)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.UpdateSandboxResponse{Sandbox: toProto(sb)}), nil
}

func (s *Server) StopSandbox(ctx context.Context, req *connect.Request[boxdv1.StopSandboxRequest]) (*connect.Response[boxdv1.StopSandboxResponse], error) {
	grace, err := runtime.ParseGrace("timeout", req.Msg.Timeout)
	if err != nil {
		return nil, ToConnect(err)
	}
	sb, err := s.Manager.Stop(ctx, req.Msg.SandboxId, grace)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.StopSandboxResponse{Sandbox: toProto(sb)}), nil
}

func (s *Server) StartSandbox(ctx context.Context, req *connect.Request[boxdv1.StartSandboxRequest]) (*connect.Response[boxdv1.StartSandboxResponse], error) {
	sb, err := s.Manager.Start(ctx, req.Msg.SandboxId)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.StartSandboxResponse{Sandbox: toProto(sb)}), nil
}

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
	out := &boxdv1.ExecResponse{Stdout: stdout.b, Stderr: stderr.b, Result: execResult(res)}
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
	return stream.Send(&boxdv1.ExecStreamResponse{Event: &boxdv1.ExecStreamResponse_Result{Result: execResult(res)}})
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
	if err := s.Manager.CopyIn(ctx, first.SandboxId, first.Path, r); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CopyInResponse{}), nil
}

// copyOutWriter sends what the init's tar frames bring as messages of up
// to client.ChunkBytes. Send marshals before it returns, so the frame's
// buffer goes into the message without a copy.
type copyOutWriter struct {
	stream *connect.ServerStream[boxdv1.CopyOutResponse]
	msg    boxdv1.CopyOutResponse
}

func (w *copyOutWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += client.ChunkBytes {
		w.msg.Data = p[off:min(off+client.ChunkBytes, len(p))]
		err := w.stream.Send(&w.msg)
		w.msg.Data = nil
		if err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func (s *Server) CopyOut(ctx context.Context, req *connect.Request[boxdv1.CopyOutRequest], stream *connect.ServerStream[boxdv1.CopyOutResponse]) error {
	return ToConnect(s.Manager.CopyOut(ctx, req.Msg.SandboxId, req.Msg.Path, &copyOutWriter{stream: stream}))
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

func imageProto(im snapshot.Image) *boxdv1.Image {
	return &boxdv1.Image{Name: im.Name, Digest: im.Digest, Size: im.Size, CreatedAt: ts(im.CreatedAt), Labels: im.Labels}
}

// imageWrite is how an image call may treat existing and used images: the
// caller's force, its identity for the audit labels, and the manager that
// knows which sandboxes use an image.
func (s *Server) imageWrite(ctx context.Context, force bool) snapshot.WriteOptions {
	o := snapshot.WriteOptions{Force: force, Caller: callerOf(ctx)}
	if s.Manager != nil {
		o.Users = s.Manager
	}
	return o
}

// callerOf spells the caller for audit labels and logs: "uid=1000 pid=123".
func callerOf(ctx context.Context) string {
	p, ok := PeerFrom(ctx)
	if !ok {
		return "unknown (no peer credentials)"
	}
	return fmt.Sprintf("uid=%d pid=%d", p.UID, p.PID)
}

func (s *Server) ImportImage(ctx context.Context, stream *connect.ClientStream[boxdv1.ImportImageRequest]) (*connect.Response[boxdv1.ImportImageResponse], error) {
	if !stream.Receive() {
		if err := stream.Err(); err != nil {
			return nil, ToConnect(err)
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("import image: empty request stream"))
	}
	first := stream.Msg()
	r := &streamReader[boxdv1.ImportImageRequest]{
		recv:  func() (bool, error) { return stream.Receive(), stream.Err() },
		msg:   stream.Msg,
		data:  (*boxdv1.ImportImageRequest).GetData,
		first: first.Data,
	}
	opts := s.imageWrite(ctx, first.Force)
	var ims []snapshot.Image
	switch first.Format {
	case boxdv1.ImageFormat_IMAGE_FORMAT_ROOTFS:
		if first.Name == "" {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("name: required when importing a rootfs"))
		}
		im, err := s.Images.ImportRootfs(ctx, r, first.Name, opts)
		if err != nil {
			return nil, ToConnect(err)
		}
		ims = append(ims, im)
	case boxdv1.ImageFormat_IMAGE_FORMAT_TAR, boxdv1.ImageFormat_IMAGE_FORMAT_UNSPECIFIED:
		var err error
		if ims, err = s.Images.ImportArchive(ctx, r, first.Name, opts); err != nil {
			return nil, ToConnect(err)
		}
	default:
		return nil, ToConnect(fmt.Errorf("format: unknown value %d: %w", first.Format, errdefs.ErrInvalidArgument))
	}
	out := &boxdv1.ImportImageResponse{}
	for _, im := range ims {
		out.Images = append(out.Images, imageProto(im))
		if im.Replaced != "" {
			s.Log.Warn("image replaced (forced)", "image", im.Name, "digest", im.Digest,
				"replaced_digest", im.Replaced, "in_use_by", im.Labels[snapshot.LabelReplacedInUse], "caller", opts.Caller)
		} else {
			s.Log.Info("image imported", "image", im.Name, "digest", im.Digest, "caller", opts.Caller)
		}
	}
	return connect.NewResponse(out), nil
}

func (s *Server) ListImages(ctx context.Context, _ *connect.Request[boxdv1.ListImagesRequest]) (*connect.Response[boxdv1.ListImagesResponse], error) {
	ims, err := s.Images.List(ctx)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ListImagesResponse{}
	for _, im := range ims {
		out.Images = append(out.Images, imageProto(im))
	}
	return connect.NewResponse(out), nil
}

func (s *Server) RemoveImage(ctx context.Context, req *connect.Request[boxdv1.RemoveImageRequest]) (*connect.Response[boxdv1.RemoveImageResponse], error) {
	opts := s.imageWrite(ctx, req.Msg.Force)
	users, err := s.Images.Remove(ctx, req.Msg.Name, opts)
	if err != nil {
		return nil, ToConnect(err)
	}
	s.Manager.DropPoolMembers(ctx, req.Msg.Name)
	if len(users) > 0 {
		s.Log.Warn("image removed (forced) from under sandboxes", "image", req.Msg.Name, "sandboxes", users, "caller", opts.Caller)
	} else {
		s.Log.Info("image removed", "image", req.Msg.Name, "force", req.Msg.Force, "caller", opts.Caller)
	}
	return connect.NewResponse(&boxdv1.RemoveImageResponse{}), nil
}

// connContext prepares each accepted connection, whichever listener it came
// from (rpc.Listen's or one passed by systemd): the socket buffers file
// data needs, and the caller's credentials from SO_PEERCRED.
// A listener that wraps its connections (the connection cap's) passes the
// socket on through NetConn.
func connContext(ctx context.Context, c net.Conn) context.Context {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	client.SetSocketBuffer(c)
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *syscall.Ucred
	var groups []uint32
	_ = raw.Control(func(fd uintptr) {
		cred, _ = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		groups = peerGroups(fd)
	})
	if cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, Peer{PID: cred.Pid, UID: int32(cred.Uid), GID: int32(cred.Gid), Groups: groups})
}
