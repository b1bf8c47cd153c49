package rpc

import (
	"context"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

// CheckpointSandbox and RestoreSandbox: runtime/checkpoint*.go.

func (s *Server) CheckpointSandbox(ctx context.Context, req *connect.Request[boxdv1.CheckpointSandboxRequest]) (*connect.Response[boxdv1.CheckpointSandboxResponse], error) {
	sb, ci, err := s.Manager.Checkpoint(ctx, req.Msg.Id, req.Msg.LeaveRunning)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CheckpointSandboxResponse{
		Id: sb.ID, State: sb.State, Bytes: ci.Bytes, Pause: ci.Pause.String(),
	}), nil
}

func (s *Server) RestoreSandbox(ctx context.Context, req *connect.Request[boxdv1.RestoreSandboxRequest]) (*connect.Response[boxdv1.RestoreSandboxResponse], error) {
	sb, err := s.Manager.Restore(ctx, req.Msg.Id)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.RestoreSandboxResponse{Id: sb.ID, State: sb.State}), nil
}

func ckBytes(ci *runtime.CheckpointInfo) int64 {
	if ci == nil {
		return 0
	}
	return ci.Bytes
}

func ckAt(ci *runtime.CheckpointInfo) string {
	if ci == nil {
		return ""
	}
	return ts(ci.At)
}

func ckPause(ci *runtime.CheckpointInfo) string {
	if ci == nil || ci.Pause == 0 {
		return ""
	}
	return ci.Pause.String()
}
