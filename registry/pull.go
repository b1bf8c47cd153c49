//go:build linux

package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/boxd-dev/boxd/snapshot"
)

// PullRequest is one pull.
type PullRequest struct {
	// Ref is a full reference; the image is stored under it.
	Ref string
	// Platform, if set, picks that platform's image out of a
	// multi-platform index; it must run on this host.
	Platform string
	Auth     Auth
	// Write says whether an existing name with another digest may be
	// replaced (Force) and who asks.
	Write snapshot.WriteOptions
}

// Pull downloads an image and stores it under its reference, unpacked for
// the snapshotter sandboxes use, exactly as an imported image is. Every
// layer is checked as a hostile tar while it downloads (checkLayer). All
// content is fetched under a lease; a pull that fails anywhere deletes the
// lease synchronously, so no blob, partial download or snapshot of it
// stays, and no name ever points at a half-pulled image. A name that
// already points at the same digest is left as it is.
func (r *Registry) Pull(ctx context.Context, req PullRequest, report Reporter) (snapshot.Image, error) {
	ref, err := ParseRef(req.Ref)
	if err != nil {
		return snapshot.Image{}, err
	}
	matcher := snapshot.HostPlatform()
	if req.Platform != "" {
		p, err := platforms.Parse(req.Platform)
		if err != nil {
			return snapshot.Image{}, fmt.Errorf("platform %q: %v: %w", req.Platform, err, errdefs.ErrInvalidArgument)
		}
		if !matcher.Match(p) {
			return snapshot.Image{}, fmt.Errorf("platform %q cannot run on this host (%s): %w", req.Platform, platforms.Format(platforms.DefaultSpec()), errdefs.ErrInvalidArgument)
		}
		matcher = platforms.Only(p)
	}
	t := newTracker(report)
	defer t.close()
	t.setPhase("resolving")
	t0 := time.Now()
	var phases []any
	phase := func(name string) { phases = append(phases, name, time.Since(t0).Round(time.Millisecond)) }
	defer func() { slog.Debug("pull timing", append([]any{"image", ref.Name}, phases...)...) }()

	c := r.store.Client()
	ls := c.LeasesService()
	l, err := ls.Create(ctx, leases.WithRandomID(), leases.WithExpiration(24*time.Hour))
	if err != nil {
		return snapshot.Image{}, fmt.Errorf("pull %s: lease: %w", ref.Name, err)
	}
	ok := false
	defer func() {
		var opts []leases.DeleteOpt
		if !ok {
			// Collect what this pull stored before answering, so a
			// failed pull has left nothing once the caller hears of it.
			opts = append(opts, leases.SynchronousDelete)
		}
		_ = ls.Delete(context.WithoutCancel(ctx), l, opts...)
	}()
	lctx := leases.WithLease(ctx, l.ID)

	resolver, closeConns := r.resolver(ref.Host, req.Auth, nil)
	defer closeConns()
	name, desc, err := resolver.Resolve(lctx, ref.Name)
	if err != nil {
		return snapshot.Image{}, r.explain(ref, err)
	}
	phase("resolved")
	if req.Platform == "" {
		if im, same, err := r.store.Current(ctx, ref.Name, desc.Digest.String()); err != nil {
			return snapshot.Image{}, err
		} else if same {
			ok = true
			t.setPhase("up to date")
			return im, nil
		}
	}
	if _, err := r.store.CheckWritable(ctx, ref.Name, req.Write); err != nil {
		return snapshot.Image{}, err
	}
	fetcher, err := resolver.Fetcher(lctx, name)
	if err != nil {
		return snapshot.Image{}, r.explain(ref, err)
	}
	cs := c.ContentStore()
	b := newBudget(r.cfg.MaxImageSize)
	var (
		mu        sync.Mutex
		checked   = map[digest.Digest]bool{}
		manifests []ocispec.Descriptor
	)
	tf := &trackedFetcher{f: fetcher, t: t, b: b, ok: func(d digest.Digest) {
		mu.Lock()
		checked[d] = true
		mu.Unlock()
	}}
	fetchOne := remotes.FetchHandler(cs, tf)
	fetch := images.HandlerFunc(func(ctx context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		if images.IsManifestType(desc.MediaType) {
			mu.Lock()
			manifests = append(manifests, desc)
			mu.Unlock()
		}
		t.set(desc, "waiting")
		if _, err := fetchOne(ctx, desc); err != nil {
			return nil, err
		}
		if t.status(desc) == "waiting" {
			t.set(desc, "exists")
		} else {
			t.set(desc, "done")
		}
		return nil, nil
	})
	children := images.LimitManifests(images.FilterPlatforms(images.SetChildrenLabels(cs, images.ChildrenHandler(cs)), matcher), matcher, 1)
	dist, err := docker.AppendDistributionSourceLabel(cs, ref.Name)
	if err != nil {
		return snapshot.Image{}, fmt.Errorf("pull %s: %w", ref.Name, err)
	}
	t.setPhase("downloading")
	if err := images.Dispatch(lctx, images.Handlers(fetch, children, dist), nil, desc); err != nil {
		return snapshot.Image{}, r.explain(ref, err)
	}

	phase("fetched")
	target := desc
	if req.Platform != "" && images.IsIndexType(desc.MediaType) {
		// The image is the one platform's manifest, so that what is
		// stored is what sandboxes on this host run.
		if len(manifests) != 1 {
			return snapshot.Image{}, fmt.Errorf("pull %s: the index has no image for platform %s: %w", ref.Name, req.Platform, errdefs.ErrNotFound)
		}
		target = manifests[0]
	}
	mf, err := images.Manifest(lctx, cs, target, matcher)
	if err != nil {
		return snapshot.Image{}, fmt.Errorf("pull %s: %v: %w", ref.Name, err, errdefs.ErrNotFound)
	}
	// Layers that were already stored did not stream through the check.
	for _, layer := range mf.Layers {
		mu.Lock()
		done := checked[layer.Digest]
		mu.Unlock()
		if done {
			continue
		}
		ra, err := cs.ReaderAt(lctx, layer)
		if err != nil {
			return snapshot.Image{}, fmt.Errorf("pull %s: layer %s: %w", ref.Name, layer.Digest, err)
		}
		err = checkLayer(content.NewReader(ra), layer.Digest, b)
		ra.Close()
		if err != nil {
			return snapshot.Image{}, r.explain(ref, err)
		}
	}

	phase("checked")
	t.setPhase("unpacking")
	rec := images.Image{Name: ref.Name, Target: target, Labels: map[string]string{snapshot.LabelPulledFrom: ref.Name + "@" + desc.Digest.String()}}
	ims, err := r.store.Record(lctx, []images.Image{rec}, req.Write)
	if errdefs.IsAlreadyExists(err) {
		// Another pull of the same image named it meanwhile: that is
		// this pull's result too.
		if im, same, cerr := r.store.Current(ctx, ref.Name, target.Digest.String()); cerr == nil && same {
			ok = true
			t.setPhase("done")
			return im, nil
		}
	}
	if err != nil {
		return snapshot.Image{}, err
	}
	phase("unpacked")
	ok = true
	t.setPhase("done")
	return ims[0], nil
}

// trackedFetcher counts what it downloads for the progress report and
// streams every layer through checkLayer on the way to the content store.
type trackedFetcher struct {
	f  remotes.Fetcher
	t  *tracker
	b  *budget
	ok func(digest.Digest) // called for each layer that passed the check
}

func (tf *trackedFetcher) Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := tf.f.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	tf.t.set(desc, "downloading")
	cr := &checkedReader{rc: rc, t: tf.t, desc: desc}
	if images.IsLayerType(desc.MediaType) {
		pr, pw := io.Pipe()
		cr.pw, cr.res = pw, make(chan error, 1)
		go func() {
			err := checkLayer(pr, desc.Digest, tf.b)
			if err == nil {
				tf.ok(desc.Digest)
				_ = pr.CloseWithError(errCheckedEarly)
			} else {
				_ = pr.CloseWithError(err)
			}
			cr.res <- err
		}()
	}
	return cr, nil
}

var errCheckedEarly = errors.New("layer check ended before the download")

// checkedReader passes a blob to the content store, and a layer to its
// check as well. A layer ends (io.EOF) only once its check has passed; a
// failed check fails the read, so the download stops there.
type checkedReader struct {
	rc   io.ReadCloser
	t    *tracker
	desc ocispec.Descriptor
	pw   *io.PipeWriter
	res  chan error
	err  error // the check's verdict once known
	over bool
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, c.err
	}
	n, err := c.rc.Read(p)
	if n > 0 {
		c.t.add(c.desc, int64(n))
		if c.pw != nil {
			if _, werr := c.pw.Write(p[:n]); werr != nil {
				c.finish(werr)
				return 0, c.err
			}
		}
	}
	if errors.Is(err, io.EOF) && c.pw != nil {
		_ = c.pw.Close()
		c.finish(nil)
		if c.err != io.EOF {
			return n, c.err
		}
	}
	return n, err
}

// finish waits for the check's verdict: a failed check is the error of
// the read; a passed one makes the read end.
func (c *checkedReader) finish(writeErr error) {
	c.over = true
	verdict := <-c.res
	switch {
	case verdict != nil:
		c.err = verdict
	case writeErr != nil && !errors.Is(writeErr, errCheckedEarly):
		c.err = writeErr
	default:
		c.err = io.EOF
	}
}

func (c *checkedReader) Close() error {
	if c.pw != nil && !c.over {
		_ = c.pw.CloseWithError(errors.New("download ended"))
		c.over = true
		<-c.res
	}
	return c.rc.Close()
}
