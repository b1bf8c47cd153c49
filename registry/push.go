//go:build linux

package registry

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	remoteerrors "github.com/containerd/containerd/v2/core/remotes/errors"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/boxd-dev/boxd/snapshot"
)

// PushRequest is one push.
type PushRequest struct {
	// Ref is the full reference to push to.
	Ref string
	// Source is the local image to push (default: Ref).
	Source string
	Auth   Auth
}

// Push uploads a local image and tags it Ref in Ref's registry, with
// containerd's client.Push. It returns the digest pushed.
func (r *Registry) Push(ctx context.Context, req PushRequest, report Reporter) (string, error) {
	ref, err := ParseRef(req.Ref)
	if err != nil {
		return "", err
	}
	src := ref.Name
	if req.Source != "" {
		if src, err = snapshot.NormalizeName(req.Source); err != nil {
			return "", err
		}
	}
	c := r.store.Client()
	rec, err := c.ImageService().Get(ctx, src)
	if errdefs.IsNotFound(err) {
		return "", fmt.Errorf("image %q not found here (pull or import it first): %w", src, errdefs.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("image %s: %w", src, err)
	}
	t := newTracker(report)
	defer t.close()
	t.setPhase("uploading")
	resolver, closeConns := r.resolver(ref.Host, req.Auth, docker.NewInMemoryTracker())
	defer closeConns()
	res := &trackedResolver{Resolver: resolver, t: t}
	// Every platform the image holds: a multi-platform index is pushed
	// whole or not at all.
	if err := c.Push(ctx, ref.Name, rec.Target, client.WithResolver(res), client.WithPlatformMatcher(platforms.All)); err != nil {
		if errdefs.IsNotFound(err) && !isRemote(err) {
			return "", fmt.Errorf("push %s: image %s is incomplete here (a platform of its index was never pulled): %v: %w", ref.Name, src, err, errdefs.ErrFailedPrecondition)
		}
		return "", r.explain(ref, err)
	}
	t.setPhase("done")
	return rec.Target.Digest.String(), nil
}

// isRemote reports whether err is a registry's answer, not a local one.
func isRemote(err error) bool {
	var status remoteerrors.ErrUnexpectedStatus
	return errors.As(err, &status)
}

// trackedResolver reports what its pusher uploads.
type trackedResolver struct {
	remotes.Resolver
	t *tracker
}

func (r *trackedResolver) Pusher(ctx context.Context, ref string) (remotes.Pusher, error) {
	p, err := r.Resolver.Pusher(ctx, ref)
	if err != nil {
		return nil, err
	}
	return remotes.PusherFunc(func(ctx context.Context, desc ocispec.Descriptor) (content.Writer, error) {
		r.t.set(desc, "waiting")
		w, err := p.Push(ctx, desc)
		if errdefs.IsAlreadyExists(err) {
			r.t.set(desc, "exists")
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		r.t.set(desc, "uploading")
		return &trackedWriter{Writer: w, t: r.t, desc: desc}, nil
	}), nil
}

type trackedWriter struct {
	content.Writer
	t    *tracker
	desc ocispec.Descriptor
}

func (w *trackedWriter) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	w.t.add(w.desc, int64(n))
	return n, err
}

func (w *trackedWriter) Commit(ctx context.Context, size int64, expected digest.Digest, opts ...content.Opt) error {
	if err := w.Writer.Commit(ctx, size, expected, opts...); err != nil {
		return err
	}
	w.t.set(w.desc, "pushed")
	return nil
}
