//go:build linux

package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
)

// processServer implements ProcessService. It is a type of its own because
// its method names (Exec, List...) would clash with SandboxService's on
// Server.
type processServer struct{ s *Server }

var _ boxdv1connect.ProcessServiceHandler = (*processServer)(nil)

func invalid(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

func windowSize(field string, w *boxdv1.WindowSize) (*wire.WindowSize, error) {
	if w == nil {
		return nil, nil
	}
	if w.Rows > wire.MaxWindowDim || w.Cols > wire.MaxWindowDim {
		return nil, invalid("%s: %dx%d: at most %d rows and columns", field, w.Rows, w.Cols, wire.MaxWindowDim)
	}
	return &wire.WindowSize{Rows: uint16(w.Rows), Cols: uint16(w.Cols)}, nil
}

func processSpec(m *boxdv1.ProcessSpec) (wire.ProcessSpec, error) {
	if m.SandboxId == "" {
		return wire.ProcessSpec{}, invalid("sandbox_id: empty")
	}
	timeout, err := runtime.ParseTimeout("timeout", m.Timeout)
	if err != nil {
		return wire.ProcessSpec{}, ToConnect(err)
	}
	win, err := windowSize("window", m.Window)
	if err != nil {
		return wire.ProcessSpec{}, err
	}
	limit := m.OutputLimit
	switch {
	case limit == -1:
		limit = wire.NoOutputLimit
	case limit < -1 || limit > wire.NoOutputLimit:
		return wire.ProcessSpec{}, invalid("output_limit: %d is neither -1 nor a byte count", limit)
	}
	return wire.ProcessSpec{
		ExecRequest: wire.ExecRequest{
			Args: m.Args, Env: m.Env, Dir: m.Workdir, Timeout: timeout, Stdin: m.Stdin, OutputLimit: limit,
			User: m.User,
		},
		Tty: m.Tty, Window: win,
	}, nil
}

func processInfo(i wire.ProcessInfo) *boxdv1.ProcessInfo {
	out := &boxdv1.ProcessInfo{
		Id: i.ID, Pid: int64(i.PID), Args: i.Args, User: i.User, Tty: i.Tty, StdinOpen: i.StdinOpen,
		State: i.State, StartedAt: ts(i.Started),
	}
	if i.Result != nil {
		out.Result = execResult(*i.Result)
	}
	return out
}

type processStream = connect.BidiStream[boxdv1.ProcessInput, boxdv1.ProcessOutput]

// firstInput reads the message that opens Exec and Attach.
func firstInput(stream *processStream, want string) (*boxdv1.ProcessInput, error) {
	msg, err := stream.Receive()
	if errors.Is(err, io.EOF) {
		return nil, invalid("empty request stream (the first message must carry %s)", want)
	}
	if err != nil {
		return nil, ToConnect(err)
	}
	return msg, nil
}

// forwardInput passes the client's messages to the process until the
// client stops sending. A malformed message cancels the call with an
// invalid_argument error.
func forwardInput(stream *processStream, ps *host.ProcessStream, halfClose func(), cancel context.CancelCauseFunc) {
	for {
		msg, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			halfClose()
			return
		}
		if err != nil {
			return // the call is over; its context ends too
		}
		switch ev := msg.Event.(type) {
		case *boxdv1.ProcessInput_Stdin:
			_, err = ps.Write(ev.Stdin)
		case *boxdv1.ProcessInput_CloseStdin:
			if ev.CloseStdin {
				err = ps.CloseStdin()
			}
		case *boxdv1.ProcessInput_Resize:
			var w *wire.WindowSize
			if w, err = windowSize("resize", ev.Resize); err == nil && w != nil {
				if w.Rows == 0 || w.Cols == 0 {
					err = invalid("resize: %dx%d: rows and columns must be positive", w.Rows, w.Cols)
				} else {
					err = ps.Resize(*w)
				}
			}
		case *boxdv1.ProcessInput_Signal:
			if _, perr := wire.ParseSignal(ev.Signal); perr != nil {
				err = invalid("signal: %q is not a signal (examples: SIGTERM, TERM, 15)", ev.Signal)
			} else {
				err = ps.Signal(ev.Signal)
			}
		default:
			err = invalid("only the first message may carry start or attach")
		}
		var ce *connect.Error
		if errors.As(err, &ce) {
			cancel(err)
			return
		}
		if err != nil {
			return // the process's connection ended; its output side reports why
		}
	}
}

// sendOutput streams the process's output and result to the client.
func sendOutput(ctx context.Context, stream *processStream, ps *host.ProcessStream) error {
	for {
		ev, err := ps.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				return cause
			}
			return ToConnect(err)
		}
		msg := &boxdv1.ProcessOutput{}
		switch {
		case ev.Result != nil:
			msg.Event = &boxdv1.ProcessOutput_Result{Result: execResult(*ev.Result)}
			msg.Usage = usage(*ev.Result)
		case ev.Stream == wire.FrameStderr:
			msg.Event = &boxdv1.ProcessOutput_Stderr{Stderr: ev.Data}
		default:
			msg.Event = &boxdv1.ProcessOutput_Stdout{Stdout: ev.Data}
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
		if ev.Result != nil {
			return nil
		}
	}
}

func (p *processServer) Exec(ctx context.Context, stream *processStream) error {
	first, err := firstInput(stream, "start")
	if err != nil {
		return err
	}
	m := first.GetStart()
	if m == nil {
		return invalid("the first message must carry start")
	}
	spec, err := processSpec(m)
	if err != nil {
		return err
	}
	spec.StdinStream = true
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ps, err := p.s.Manager.ExecProcess(ctx, m.SandboxId, spec)
	if err != nil {
		return ToConnect(err)
	}
	defer ps.Close()
	go forwardInput(stream, ps, func() { ps.CloseStdin() }, cancel)
	return sendOutput(ctx, stream, ps)
}

func (p *processServer) Attach(ctx context.Context, stream *processStream) error {
	first, err := firstInput(stream, "attach")
	if err != nil {
		return err
	}
	m := first.GetAttach()
	if m == nil {
		return invalid("the first message must carry attach")
	}
	if m.SandboxId == "" {
		return invalid("sandbox_id: empty")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ps, info, err := p.s.Manager.AttachProcess(ctx, m.SandboxId, wire.AttachArgs{ID: m.ProcessId, Stdin: m.Stdin, NoFollow: m.NoFollow})
	if err != nil {
		return ToConnect(err)
	}
	defer ps.Close()
	if err := stream.Send(&boxdv1.ProcessOutput{Event: &boxdv1.ProcessOutput_Process{Process: processInfo(info)}}); err != nil {
		return err
	}
	// A client that stops sending has not detached: it may still read.
	go forwardInput(stream, ps, func() {}, cancel)
	return sendOutput(ctx, stream, ps)
}

func (p *processServer) Start(ctx context.Context, req *connect.Request[boxdv1.StartProcessRequest]) (*connect.Response[boxdv1.StartProcessResponse], error) {
	m := req.Msg.Spec
	if m == nil {
		return nil, invalid("spec: missing")
	}
	spec, err := processSpec(m)
	if err != nil {
		return nil, err
	}
	spec.StdinStream = m.KeepStdinOpen
	info, err := p.s.Manager.StartProcess(ctx, m.SandboxId, spec)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.StartProcessResponse{Process: processInfo(info)}), nil
}

func (p *processServer) List(ctx context.Context, req *connect.Request[boxdv1.ListProcessesRequest]) (*connect.Response[boxdv1.ListProcessesResponse], error) {
	infos, err := p.s.Manager.ListProcesses(ctx, req.Msg.SandboxId)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ListProcessesResponse{}
	for _, i := range infos {
		out.Processes = append(out.Processes, processInfo(i))
	}
	return connect.NewResponse(out), nil
}

func (p *processServer) Wait(ctx context.Context, req *connect.Request[boxdv1.WaitProcessRequest]) (*connect.Response[boxdv1.WaitProcessResponse], error) {
	info, err := p.s.Manager.WaitProcess(ctx, req.Msg.SandboxId, req.Msg.ProcessId)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.WaitProcessResponse{Process: processInfo(info)}
	if info.Result != nil {
		out.Usage = usage(*info.Result)
	}
	return connect.NewResponse(out), nil
}

func (p *processServer) Signal(ctx context.Context, req *connect.Request[boxdv1.SignalProcessRequest]) (*connect.Response[boxdv1.SignalProcessResponse], error) {
	if req.Msg.All {
		return p.killAll(ctx, req.Msg)
	}
	sig := req.Msg.Signal
	if sig == "" {
		sig = "SIGKILL"
	}
	info, err := p.s.Manager.SignalProcess(ctx, req.Msg.SandboxId, req.Msg.ProcessId, sig)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.SignalProcessResponse{Process: processInfo(info)}), nil
}

// killAll ends every exec's leftovers in a sandbox (Signal with all).
func (p *processServer) killAll(ctx context.Context, msg *boxdv1.SignalProcessRequest) (*connect.Response[boxdv1.SignalProcessResponse], error) {
	if msg.ProcessId != "" {
		return nil, invalid("process_id: must be empty with all")
	}
	if msg.Signal != "" && msg.Signal != "SIGKILL" && msg.Signal != "KILL" && msg.Signal != "9" {
		return nil, invalid("signal: all always kills (SIGKILL), got %q", msg.Signal)
	}
	if _, err := p.s.Manager.KillAll(ctx, msg.SandboxId); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.SignalProcessResponse{}), nil
}

func sessionProto(i wire.SessionInfo) *boxdv1.Session {
	return &boxdv1.Session{
		Name: i.Name, Shell: i.Shell, User: i.User, Pid: int64(i.PID), CreatedAt: ts(i.Created),
		Busy: i.Busy, Commands: i.Commands, Restarts: i.Restarts,
	}
}

func (p *processServer) CreateSession(ctx context.Context, req *connect.Request[boxdv1.CreateSessionRequest]) (*connect.Response[boxdv1.CreateSessionResponse], error) {
	m := req.Msg
	info, err := p.s.Manager.CreateSession(ctx, m.SandboxId, wire.SessionSpec{
		Name: m.Name, Shell: m.Shell, User: m.User, Env: m.Env, Dir: m.Workdir,
	})
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CreateSessionResponse{Session: sessionProto(info)}), nil
}

func (p *processServer) ListSessions(ctx context.Context, req *connect.Request[boxdv1.ListSessionsRequest]) (*connect.Response[boxdv1.ListSessionsResponse], error) {
	infos, err := p.s.Manager.ListSessions(ctx, req.Msg.SandboxId)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ListSessionsResponse{}
	for _, i := range infos {
		out.Sessions = append(out.Sessions, sessionProto(i))
	}
	return connect.NewResponse(out), nil
}

func (p *processServer) DeleteSession(ctx context.Context, req *connect.Request[boxdv1.DeleteSessionRequest]) (*connect.Response[boxdv1.DeleteSessionResponse], error) {
	if err := p.s.Manager.RemoveSession(ctx, req.Msg.SandboxId, req.Msg.Name); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.DeleteSessionResponse{}), nil
}

// sessionWriter sends each write as one stream message; mu serialises the
// stdout and stderr writers on one stream.
type sessionWriter struct {
	mu     *sync.Mutex
	stream *connect.ServerStream[boxdv1.SessionExecResponse]
	stderr bool
}

func (w *sessionWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for off := 0; off < len(p); off += chunkSize {
		b := p[off:min(off+chunkSize, len(p))]
		msg := &boxdv1.SessionExecResponse{Event: &boxdv1.SessionExecResponse_Stdout{Stdout: b}}
		if w.stderr {
			msg.Event = &boxdv1.SessionExecResponse_Stderr{Stderr: b}
		}
		if err := w.stream.Send(msg); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func (p *processServer) SessionExec(ctx context.Context, req *connect.Request[boxdv1.SessionExecRequest], stream *connect.ServerStream[boxdv1.SessionExecResponse]) error {
	m := req.Msg
	timeout, err := runtime.ParseTimeout("timeout", m.Timeout)
	if err != nil {
		return ToConnect(err)
	}
	var mu sync.Mutex
	res, err := p.s.Manager.SessionExec(ctx, m.SandboxId,
		wire.SessionCommand{Name: m.Name, Command: m.Command, Timeout: timeout, OutputLimit: m.OutputLimit},
		&sessionWriter{mu: &mu, stream: stream}, &sessionWriter{mu: &mu, stream: stream, stderr: true})
	if err != nil {
		return ToConnect(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return stream.Send(&boxdv1.SessionExecResponse{Event: &boxdv1.SessionExecResponse_Result{Result: &boxdv1.SessionExecResult{
		Result:           execResult(res.ExecResult),
		SessionRestarted: res.Restarted,
		SessionEnded:     res.SessionEnded,
	}}})
}
