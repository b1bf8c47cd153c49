//go:build linux

package rpc

import (
	"context"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
)

// codeServer implements boxdv1connect.CodeServiceHandler: thin over the
// runtime's interp room, which finds the caller's sandbox (another user's
// is not_found) and checks what the sandbox sends back.
type codeServer struct{ s *Server }

var _ boxdv1connect.CodeServiceHandler = (*codeServer)(nil)

func (c *codeServer) RunCode(ctx context.Context, req *connect.Request[boxdv1.RunCodeRequest], stream *connect.ServerStream[boxdv1.RunCodeResponse]) error {
	m := req.Msg
	timeout, err := runtime.ParseTimeout("timeout", m.Timeout)
	if err != nil {
		return ToConnect(err)
	}
	out := func(name string, b []byte) error {
		msg := &boxdv1.RunCodeResponse{Event: &boxdv1.RunCodeResponse_Stdout{Stdout: b}}
		if name == "stderr" {
			msg.Event = &boxdv1.RunCodeResponse_Stderr{Stderr: b}
		}
		return stream.Send(msg)
	}
	res, err := c.s.Manager.RunCode(ctx, m.SandboxId, runtime.RunCodeRequest{Code: m.Code, Language: m.Language,
		Context: m.Context, Timeout: timeout, OutputLimit: m.OutputLimit}, out)
	if err != nil {
		return ToConnect(err)
	}
	return stream.Send(&boxdv1.RunCodeResponse{Event: &boxdv1.RunCodeResponse_Result{Result: codeResult(res)}})
}

func codeResult(r *runtime.CodeResult) *boxdv1.CodeResult {
	out := &boxdv1.CodeResult{Truncated: r.Truncated, TimedOut: r.TimedOut, Interrupted: r.Interrupted,
		Restarted: r.Restarted, ExecutionCount: r.Count, Context: r.Context, DurationMs: r.Duration.Milliseconds()}
	if r.Value != nil {
		out.Value = &boxdv1.CodeOutput{Data: r.Value}
	}
	for _, d := range r.Displays {
		out.Displays = append(out.Displays, &boxdv1.CodeOutput{Data: d})
	}
	if e := r.Error; e != nil {
		out.Error = &boxdv1.CodeError{Name: e.Name, Value: e.Value, Traceback: e.Traceback}
	}
	return out
}

func (c *codeServer) ListCodeContexts(ctx context.Context, req *connect.Request[boxdv1.ListCodeContextsRequest]) (*connect.Response[boxdv1.ListCodeContextsResponse], error) {
	list, err := c.s.Manager.ListCodeContexts(ctx, req.Msg.SandboxId)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ListCodeContextsResponse{}
	for _, x := range list {
		out.Contexts = append(out.Contexts, &boxdv1.CodeContext{Name: x.Name, Language: x.Language, ExecutionCount: x.Count})
	}
	return connect.NewResponse(out), nil
}

func (c *codeServer) RestartCodeContext(ctx context.Context, req *connect.Request[boxdv1.RestartCodeContextRequest]) (*connect.Response[boxdv1.RestartCodeContextResponse], error) {
	if err := c.s.Manager.RestartCodeContext(ctx, req.Msg.SandboxId, req.Msg.Context); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.RestartCodeContextResponse{}), nil
}

func (c *codeServer) DeleteCodeContext(ctx context.Context, req *connect.Request[boxdv1.DeleteCodeContextRequest]) (*connect.Response[boxdv1.DeleteCodeContextResponse], error) {
	if err := c.s.Manager.DeleteCodeContext(ctx, req.Msg.SandboxId, req.Msg.Context); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.DeleteCodeContextResponse{}), nil
}
