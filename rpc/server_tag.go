//go:build linux

package rpc

import (
	"context"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TagImage gives an image a second name (docker tag). The gate lets only
// admins through: a name is what everyone's future sandboxes are made from.
func (s *Server) TagImage(ctx context.Context, req *connect.Request[boxdv1.TagImageRequest]) (*connect.Response[boxdv1.TagImageResponse], error) {
	opts := s.imageWrite(ctx, req.Msg.Force)
	img, err := s.Images.TagImage(ctx, req.Msg.Source, req.Msg.Target, opts)
	if err != nil {
		return nil, ToConnect(err)
	}
	if img.Replaced != "" {
		s.Log.Warn("image name replaced by a tag (forced)", "image", img.Name, "source", req.Msg.Source, "replaced", img.Replaced, "caller", opts.Caller)
	} else {
		s.Log.Info("image tagged", "image", img.Name, "source", req.Msg.Source, "caller", opts.Caller)
	}
	return connect.NewResponse(&boxdv1.TagImageResponse{Image: imageProto(img)}), nil
}
