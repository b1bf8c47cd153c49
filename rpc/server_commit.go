//go:build linux

package rpc

import (
	"context"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

func (s *Server) CommitSandbox(ctx context.Context, req *connect.Request[boxdv1.CommitSandboxRequest]) (*connect.Response[boxdv1.CommitSandboxResponse], error) {
	m := req.Msg
	opts := s.imageWrite(ctx, m.Force)
	im, err := s.Manager.Commit(ctx, runtime.CommitRequest{Sandbox: m.SandboxId, Ref: m.Ref, Message: m.Message, Opts: opts})
	if err != nil {
		return nil, ToConnect(err)
	}
	if im.Replaced != "" {
		s.Log.Warn("image replaced (forced) by a commit", "image", im.Name, "digest", im.Digest, "replaced_digest", im.Replaced, "sandbox", m.SandboxId, "caller", opts.Caller)
	}
	return connect.NewResponse(&boxdv1.CommitSandboxResponse{Image: imageProto(im)}), nil
}

func (s *Server) ForkSandbox(ctx context.Context, req *connect.Request[boxdv1.ForkSandboxRequest]) (*connect.Response[boxdv1.ForkSandboxResponse], error) {
	m := req.Msg
	fr := runtime.ForkRequest{Source: m.SandboxId, Count: int(m.Count), Names: m.Names, Env: m.Env, Workdir: m.Workdir, Labels: m.Labels, TTL: m.Ttl,
		CloneVolumes: m.CloneVolumes, ShareVolumes: m.ShareVolumes, WithProcesses: m.WithProcesses}
	if m.Count > runtime.MaxForks {
		fr.Count = runtime.MaxForks + 1 // refused by Fork, naming the field
	}
	if l := m.Limits; l != nil {
		fr.Memory, fr.CPUs, fr.Pids = l.Memory, l.Cpus, l.Pids
	}
	sbs, err := s.Manager.Fork(ctx, fr)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ForkSandboxResponse{}
	for _, sb := range sbs {
		out.Sandboxes = append(out.Sandboxes, toProto(sb))
	}
	return connect.NewResponse(out), nil
}
