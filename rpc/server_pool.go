//go:build linux

package rpc

import (
	"context"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
)

// poolServer implements boxdv1connect.PoolServiceHandler; the gate lets
// only admins call SetPoolSize.
type poolServer struct{ s *Server }

var _ boxdv1connect.PoolServiceHandler = (*poolServer)(nil)

func poolProto(p runtime.PoolStatus) *boxdv1.Pool {
	return &boxdv1.Pool{Image: p.Image, Runtime: p.Runtime, Size: int32(p.Size), Ready: int32(p.Ready), Starting: int32(p.Starting),
		Network: p.Network, HandedOut: p.HandedOut, ColdEmpty: p.ColdEmpty, ColdUnfit: p.ColdUnfit}
}

func (p *poolServer) SetPoolSize(ctx context.Context, req *connect.Request[boxdv1.SetPoolSizeRequest]) (*connect.Response[boxdv1.SetPoolSizeResponse], error) {
	if err := p.s.Manager.SetPoolSize(ctx, req.Msg.Image, req.Msg.Runtime, int(req.Msg.Size)); err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.SetPoolSizeResponse{}
	name, _ := p.s.Manager.PoolImageName(req.Msg.Image)
	rt := req.Msg.Runtime
	if rt == "" {
		rt = runtime.RuntimeRunc
	}
	for _, st := range p.s.Manager.PoolStatus() {
		if st.Image == name && st.Runtime == rt && st.Network == "" {
			out.Pool = poolProto(st)
		}
	}
	if out.Pool == nil {
		out.Pool = &boxdv1.Pool{Image: name, Runtime: rt}
	}
	return connect.NewResponse(out), nil
}

func (p *poolServer) ListPools(_ context.Context, _ *connect.Request[boxdv1.ListPoolsRequest]) (*connect.Response[boxdv1.ListPoolsResponse], error) {
	out := &boxdv1.ListPoolsResponse{}
	for _, st := range p.s.Manager.PoolStatus() {
		out.Pools = append(out.Pools, poolProto(st))
	}
	return connect.NewResponse(out), nil
}
