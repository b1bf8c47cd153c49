//go:build linux

package rpc

import (
	"context"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/network/ports"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

func portSpec(p *boxdv1.PublishedPort) runtime.PortSpec {
	if p == nil {
		return runtime.PortSpec{}
	}
	return runtime.PortSpec{HostIP: p.HostIp, HostPort: int(p.HostPort), Port: int(p.Port), Protocol: p.Protocol}
}

func portSpecs(ps []*boxdv1.PublishedPort) []runtime.PortSpec {
	out := make([]runtime.PortSpec, 0, len(ps))
	for _, p := range ps {
		out = append(out, portSpec(p))
	}
	return out
}

func portsProto(ms []runtime.PortSpec) []*boxdv1.PublishedPort {
	out := make([]*boxdv1.PublishedPort, 0, len(ms))
	for _, m := range ms {
		state := "published"
		if m.Down != "" {
			state = "unpublished"
		}
		out = append(out, &boxdv1.PublishedPort{HostIp: m.HostIP, HostPort: uint32(m.HostPort), Port: uint32(m.Port), Protocol: m.Protocol,
			State: state, Error: ports.DownReason(m.Down)})
	}
	return out
}

func (s *Server) PublishPort(ctx context.Context, req *connect.Request[boxdv1.PublishPortRequest]) (*connect.Response[boxdv1.PublishPortResponse], error) {
	got, err := s.Manager.PublishPort(ctx, req.Msg.SandboxId, portSpec(req.Msg.Port))
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.PublishPortResponse{Port: portsProto([]runtime.PortSpec{got})[0]}), nil
}

func (s *Server) UnpublishPort(ctx context.Context, req *connect.Request[boxdv1.UnpublishPortRequest]) (*connect.Response[boxdv1.UnpublishPortResponse], error) {
	gone, err := s.Manager.UnpublishPort(ctx, req.Msg.SandboxId, int(req.Msg.Port), int(req.Msg.HostPort))
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.UnpublishPortResponse{Ports: portsProto(gone)}), nil
}
