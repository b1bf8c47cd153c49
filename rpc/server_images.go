//go:build linux

package rpc

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/containerd/errdefs"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/snapshot"
)

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
