//go:build linux

package rpc

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// Handler returns the HTTP handler serving the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(boxdv1connect.NewSandboxServiceHandler(s, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewFileServiceHandler(&fileServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewProcessServiceHandler(&processServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewEventServiceHandler(&eventServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewRegistryServiceHandler(&registryServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewPoolServiceHandler(&poolServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewVolumeServiceHandler(&volumeServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewTokenServiceHandler(&tokenServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewCodeServiceHandler(&codeServer{s}, s.handlerOptions()...))
	mux.Handle(boxdv1connect.NewSecretServiceHandler(&secretServer{s}, s.handlerOptions()...))
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
	boxdv1connect.VolumeServiceName,
	boxdv1connect.TokenServiceName,
	boxdv1connect.CodeServiceName,
	boxdv1connect.SecretServiceName,
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
		connect.WithInterceptors(s.logInterceptor(), authInterceptor{}),
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
		go ll.serveRefusals(proto, nil)
	}
	errc := make(chan error, 2+len(s.Remote))
	go func() { errc <- srv.Serve(ln) }()
	if s.Unchecked != nil {
		go func() { errc <- srv.Serve(uncheckedListener{s.Unchecked}) }()
	}
	remote := s.remoteServer(srv)
	for _, rl := range s.Remote {
		if s.MaxConns > 0 {
			ll := newLimitListener(rl.Listener, s.MaxConns, s.Log)
			defer ll.Close()
			go ll.serveRefusals(remote.Protocols, rl.TLS)
			rl.Listener = ll
		}
		go func() { errc <- remote.Serve(remoteListener(rl)) }()
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
		_ = remote.Shutdown(sctx)
		_ = srv.Close()
		_ = remote.Close()
		return nil
	}
}

// logInterceptor logs each call that fails with who made it; successes of
// hot calls are not logged to keep exec cheap.
func (s *Server) logInterceptor() connect.Interceptor {
	return &interceptor{log: s.Log, metrics: s.Metrics}
}

type interceptor struct {
	log     *slog.Logger
	metrics *Metrics // nil: none
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		i.record(ctx, req.Spec().Procedure, start, err)
		return resp, err
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		i.record(ctx, conn.Spec().Procedure, start, err)
		return err
	}
}

func (i *interceptor) record(ctx context.Context, proc string, start time.Time, err error) {
	if i.metrics != nil {
		i.metrics.record(proc, start, err)
	}
	if err == nil || authBlocked(ctx) {
		return
	}
	p, _ := PeerFrom(ctx)
	i.log.Info("call failed", "procedure", proc, "code", connect.CodeOf(err).String(), "err", err, "peer_uid", p.UID, "peer_pid", p.PID)
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
	apiwire.SetSocketBuffer(c)
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
