//go:build linux

package rpc

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/registry"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
)

// registryServer implements boxdv1connect.RegistryServiceHandler.
type registryServer struct{ s *Server }

var _ boxdv1connect.RegistryServiceHandler = (*registryServer)(nil)

func authOf(a *boxdv1.RegistryAuth) registry.Auth {
	if a == nil {
		return registry.Auth{}
	}
	return registry.Auth{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken}
}

func progressProto(p registry.Progress) *boxdv1.TransferProgress {
	out := &boxdv1.TransferProgress{Phase: p.Phase}
	for _, b := range p.Blobs {
		out.Blobs = append(out.Blobs, &boxdv1.BlobProgress{Digest: b.Digest, Kind: b.Kind, Size: b.Size, Done: b.Done, Status: b.Status})
	}
	return out
}

func (r *registryServer) registry() (*registry.Registry, error) {
	if r.s.Registry == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this boxd has no registry access configured"))
	}
	return r.s.Registry, nil
}

func (r *registryServer) PullImage(ctx context.Context, req *connect.Request[boxdv1.PullImageRequest], stream *connect.ServerStream[boxdv1.PullImageResponse]) error {
	reg, err := r.registry()
	if err != nil {
		return err
	}
	m := req.Msg
	opts := r.s.imageWrite(ctx, m.Force)
	im, err := reg.Pull(ctx, registry.PullRequest{Ref: m.Reference, Platform: m.Platform, Auth: authOf(m.Auth), Write: opts},
		func(p registry.Progress) {
			_ = stream.Send(&boxdv1.PullImageResponse{Msg: &boxdv1.PullImageResponse_Progress{Progress: progressProto(p)}})
		})
	if err != nil {
		return ToConnect(err)
	}
	r.s.Log.Info("image pulled", "image", im.Name, "digest", im.Digest, "replaced_digest", im.Replaced, "caller", opts.Caller)
	return stream.Send(&boxdv1.PullImageResponse{Msg: &boxdv1.PullImageResponse_Image{Image: imageProto(im)}})
}

func (r *registryServer) PushImage(ctx context.Context, req *connect.Request[boxdv1.PushImageRequest], stream *connect.ServerStream[boxdv1.PushImageResponse]) error {
	reg, err := r.registry()
	if err != nil {
		return err
	}
	m := req.Msg
	d, err := reg.Push(ctx, registry.PushRequest{Ref: m.Reference, Source: m.Source, Auth: authOf(m.Auth)},
		func(p registry.Progress) {
			_ = stream.Send(&boxdv1.PushImageResponse{Msg: &boxdv1.PushImageResponse_Progress{Progress: progressProto(p)}})
		})
	if err != nil {
		return ToConnect(err)
	}
	r.s.Log.Info("image pushed", "reference", m.Reference, "source", m.Source, "digest", d, "caller", callerOf(ctx))
	return stream.Send(&boxdv1.PushImageResponse{Msg: &boxdv1.PushImageResponse_Digest{Digest: d}})
}

// pullForCreate pulls a create's image as its pull field asks: never
// (the default), missing, or always.
func (s *Server) pullForCreate(ctx context.Context, m *boxdv1.CreateSandboxRequest) error {
	mode := m.Pull
	switch mode {
	case "", "never":
		return nil
	case "missing", "always":
	default:
		return fmt.Errorf("pull: %q is not never, missing or always: %w", mode, errdefs.ErrInvalidArgument)
	}
	if s.Registry == nil {
		return fmt.Errorf("pull: this boxd has no registry access configured: %w", errdefs.ErrNotImplemented)
	}
	name := m.Image
	if name == "" {
		name = s.DefaultImage
	}
	if mode == "missing" {
		_, err := s.Images.Get(ctx, name)
		if err == nil || !errdefs.IsNotFound(err) {
			return nil // present, or an error the create itself reports
		}
	}
	// The gate refuses a non-admin's pull (requestRules); this holds it
	// if the image went away since.
	if c, _ := runtime.CallerFrom(ctx); !c.Admin {
		return fmt.Errorf("pull: %s of %s: only root and members of boxd's --admin-group may pull images: %w", mode, name, errdefs.ErrPermissionDenied)
	}
	_, err := s.Registry.Pull(ctx, registry.PullRequest{Ref: name, Auth: authOf(m.RegistryAuth), Write: s.imageWrite(ctx, mode == "always")}, nil)
	if mode == "missing" && errdefs.IsAlreadyExists(err) {
		return nil // another create pulled it meanwhile
	}
	if err != nil {
		return fmt.Errorf("pull %s for the create: %w", name, err)
	}
	s.Log.Info("image pulled for a create", "image", name, "pull", mode, "caller", callerOf(ctx))
	return nil
}
