//go:build linux

package rpc

import (
	"context"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

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
		Volumes:         sandboxVolumesProto(sb.Volumes),
		Binds:           sandboxBindsProto(sb.Binds),
		CheckpointBytes: ckBytes(sb.Checkpoint), CheckpointedAt: ckAt(sb.Checkpoint), CheckpointPause: ckPause(sb.Checkpoint),
		Secrets:    sandboxSecretsProto(sb.Network),
		AutoResume: sb.AutoResume,
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
		IdleTimeout: m.IdleTimeout, OnIdle: m.OnIdle, AutoResume: m.AutoResume,
		User: m.User, Replace: m.Replace, Cold: m.Cold, Runtime: m.Runtime, Volumes: m.Volumes, Binds: m.Binds,
		Secrets: m.Secrets,
		Git:     m.Git, GitDepth: m.GitDepth,
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
	return &boxdv1.NetworkStatus{Mode: n.Mode, Allow: n.Allow, Address: n.Addr, Gateway: n.Gateway, Dns: n.DNS, Address6: n.Addr6}
}

func (s *Server) UpdateNetwork(ctx context.Context, req *connect.Request[boxdv1.UpdateNetworkRequest]) (*connect.Response[boxdv1.UpdateNetworkResponse], error) {
	n, err := s.Manager.ChangeNetwork(ctx, req.Msg.SandboxId, req.Msg.Allow, req.Msg.Deny)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.UpdateNetworkResponse{Network: netToProto(n)}), nil
}

func (s *Server) NetworkLog(ctx context.Context, req *connect.Request[boxdv1.NetworkLogRequest]) (*connect.Response[boxdv1.NetworkLogResponse], error) {
	recs, err := s.Manager.NetworkLog(ctx, req.Msg.SandboxId)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.NetworkLogResponse{}
	for _, r := range recs {
		out.Denials = append(out.Denials, &boxdv1.EgressDenial{
			First: r.First.UTC().Format(time.RFC3339Nano), Last: r.Last.UTC().Format(time.RFC3339Nano),
			Dest: r.Dest, Port: uint32(r.Port), Proto: r.Proto, Reason: r.Reason, Count: r.Count})
	}
	return connect.NewResponse(out), nil
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

func sandboxVolumesProto(vs []runtime.SandboxVolume) []*boxdv1.VolumeMount {
	var out []*boxdv1.VolumeMount
	for _, v := range vs {
		out = append(out, &boxdv1.VolumeMount{Volume: v.Name, VolumeId: v.ID, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	return out
}

func sandboxBindsProto(bs []runtime.SandboxBind) []*boxdv1.BindMount {
	var out []*boxdv1.BindMount
	for _, b := range bs {
		out = append(out, &boxdv1.BindMount{Source: b.Source, Path: b.Path, ReadOnly: b.ReadOnly, Noexec: b.NoExec})
	}
	return out
}
