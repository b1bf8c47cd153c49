//go:build linux

package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispecs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/boxd-dev/boxd/internal/layerdiff"
)

// LabelCommittedFrom is set on an image made by a commit: the sandbox it
// came from.
const LabelCommittedFrom = "boxd.io/committed-from"

// CommitSpec describes an image made from a sandbox: its base image, the
// layers on top and the config changes.
type CommitSpec struct {
	Name string
	// Base is the image the sandbox was made from (name and the digest
	// it pointed at then).
	Base images.Image
	// Layers makes the new layers, calling add's methods once per
	// layer, bottom first. The caller keeps what it reads still around
	// the calls (or, for Copy, inside its copy function).
	Layers  func(ctx context.Context, add LayerAdder) error
	Env     []string
	Workdir string
	// Message and CreatedBy go into the new layers' history entries.
	Message, CreatedBy string
	Sandbox            string // for LabelCommittedFrom
	Opts               WriteOptions
	// Config, when set, edits the config instead of Env and Workdir
	// (a build sets every field a Dockerfile can), and a commit without
	// layers records an empty-layer history entry.
	Config func(*ocispec.ImageConfig)
	Labels map[string]string // added to the image record's labels
}

// LayerAdder adds one layer to a commit per call.
type LayerAdder interface {
	// Tar streams one uncompressed layer tar, which goes into the
	// content store and is unpacked into the layer's snapshot in the
	// same pass.
	Tar(write func(io.Writer) error) error
	// Copy has copy fill the upperdir of the layer's new snapshot (on
	// the layers under it) directly, as an unpacked layer tar would be;
	// the layer tar is then written from that snapshot. What copy reads
	// need hold still only while it runs.
	Copy(copy func(upper string) error) error
}

// layerAdder is Commit's LayerAdder: add takes a tar writer or a copy.
type layerAdder struct {
	add func(write func(io.Writer) error, fill func(string) error) error
}

func (a layerAdder) Tar(write func(io.Writer) error) error { return a.add(write, nil) }
func (a layerAdder) Copy(fill func(upper string) error) error {
	return a.add(nil, fill)
}

// CheckWritable refuses name, normalized, if it exists and opts.Force is
// not set; call it before work a refusal would waste.
func (s *Store) CheckWritable(ctx context.Context, name string, opts WriteOptions) (string, error) {
	n, err := NormalizeName(name)
	if err != nil {
		return "", err
	}
	return n, s.checkWritable(ctx, n, opts)
}

// BaseImage returns the image record for a sandbox's image: name, and the
// manifest or index digest it pointed at when the sandbox was made (the
// name may point elsewhere since). The content must still be there.
func (s *Store) BaseImage(ctx context.Context, name, dgst string) (images.Image, error) {
	d, err := digest.Parse(dgst)
	if err != nil {
		rec, gerr := s.c.ImageService().Get(ctx, name)
		if gerr != nil {
			return images.Image{}, fmt.Errorf("the sandbox's image %s: %w", name, gerr)
		}
		return rec, nil
	}
	cs := s.c.ContentStore()
	info, err := cs.Info(ctx, d)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return images.Image{}, fmt.Errorf("the sandbox's image %s (%s) is no longer stored (it was replaced or removed since): %w", name, d, errdefs.ErrFailedPrecondition)
		}
		return images.Image{}, fmt.Errorf("the sandbox's image %s: %w", name, err)
	}
	b, err := content.ReadBlob(ctx, cs, ocispec.Descriptor{Digest: d, Size: info.Size})
	if err != nil {
		return images.Image{}, fmt.Errorf("the sandbox's image %s: %w", name, err)
	}
	var probe struct {
		MediaType string          `json:"mediaType"`
		Manifests json.RawMessage `json:"manifests"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return images.Image{}, fmt.Errorf("the sandbox's image %s: %w", name, err)
	}
	mt := probe.MediaType
	if mt == "" {
		mt = ocispec.MediaTypeImageManifest
		if probe.Manifests != nil {
			mt = ocispec.MediaTypeImageIndex
		}
	}
	return images.Image{Name: name, Target: ocispec.Descriptor{MediaType: mt, Digest: d, Size: info.Size}}, nil
}

// ociLayerType maps Docker's layer media types to the OCI ones for the
// same bytes, so a committed image is one OCI manifest.
func ociLayerType(mt string) string {
	switch mt {
	case images.MediaTypeDockerSchema2Layer:
		return ocispec.MediaTypeImageLayer
	case images.MediaTypeDockerSchema2LayerGzip:
		return ocispec.MediaTypeImageLayerGzip
	}
	return mt
}

// Commit makes an image from spec: the base image's layers, the new
// layers, and the base config with spec's env, workdir and history. The
// name is refused if it exists unless spec.Opts.Force; the image is
// unpacked before the name points at it, and a failure leaves no name.
// Content nothing ends up referencing goes with the lease.
func (s *Store) Commit(ctx context.Context, spec CommitSpec) (Image, error) {
	name, err := s.CheckWritable(ctx, spec.Name, spec.Opts)
	if err != nil {
		return Image{}, err
	}
	ctx, done, err := s.c.WithLease(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("commit %s: lease: %w", name, err)
	}
	defer done(context.WithoutCancel(ctx))
	cs := s.c.ContentStore()
	manifest, cfg, err := baseImage(ctx, cs, spec.Base)
	if err != nil {
		return Image{}, fmt.Errorf("commit %s: %w", name, err)
	}

	var (
		layers  []ocispec.Descriptor
		pending []*pendingLayer
	)
	// Whatever pending layers are left unfinished give their content back.
	defer func() {
		for _, p := range pending {
			p.abort()
		}
	}()
	diffIDs := slices.Clone(cfg.RootFS.DiffIDs)
	add := func(write func(io.Writer) error, fill func(string) error) error {
		parent := identity.ChainID(diffIDs).String()
		var (
			p   *pendingLayer
			err error
		)
		if fill != nil {
			p, err = s.copyLayer(ctx, name, parent, fill)
		} else {
			p, err = s.writeLayer(ctx, name, parent, write)
		}
		if err != nil {
			return err
		}
		pending = append(pending, p)
		layers = append(layers, p.desc)
		diffIDs = append(diffIDs, p.desc.Digest)
		return nil
	}
	if err := spec.Layers(ctx, layerAdder{add: add}); err != nil {
		return Image{}, fmt.Errorf("commit %s: %w", name, err)
	}
	// The content store syncs each blob to disk as it commits it: done
	// here, after spec.Layers has let the sandbox run on.
	for len(pending) > 0 {
		if err := pending[0].commit(); err != nil {
			return Image{}, fmt.Errorf("commit %s: %w", name, err)
		}
		pending = pending[1:]
	}

	commitConfig(&cfg, spec, layers)
	mDesc, err := s.writeManifest(ctx, cs, cfg, manifest.Layers, layers)
	if err != nil {
		return Image{}, fmt.Errorf("commit %s: %w", name, err)
	}
	plat := ocispec.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
	mDesc.Platform = &plat
	rec := images.Image{Name: name, Target: mDesc, Labels: map[string]string{}}
	if spec.Sandbox != "" {
		rec.Labels[LabelCommittedFrom] = spec.Sandbox
	}
	maps.Copy(rec.Labels, spec.Labels)
	imgs, err := s.commit(ctx, []images.Image{rec}, spec.Opts)
	if err != nil {
		return Image{}, err
	}
	return imgs[0], nil
}

// pendingLayer is a layer whose bytes are in the content store's ingest
// and whose snapshot is committed; commit makes its blob.
type pendingLayer struct {
	desc   ocispec.Descriptor
	commit func() error
	abort  func()
}

// baseImage reads the manifest and config of the image a commit builds on.
func baseImage(ctx context.Context, cs content.Store, base images.Image) (ocispec.Manifest, ocispec.Image, error) {
	var cfg ocispec.Image
	manifest, err := images.Manifest(ctx, cs, base.Target, platformMatcher())
	if err != nil {
		return manifest, cfg, fmt.Errorf("the base image %s: %w", base.Name, err)
	}
	cfgBlob, err := content.ReadBlob(ctx, cs, manifest.Config)
	if err != nil {
		return manifest, cfg, fmt.Errorf("the base image's config: %w", err)
	}
	if err := json.Unmarshal(cfgBlob, &cfg); err != nil {
		return manifest, cfg, fmt.Errorf("the base image's config: %w", err)
	}
	return manifest, cfg, nil
}

// commitConfig turns the base image's config into the commit's: spec's
// settings, and the new layers in its root filesystem and history.
func commitConfig(cfg *ocispec.Image, spec CommitSpec, layers []ocispec.Descriptor) {
	now := time.Now().UTC()
	cfg.Created = &now
	if spec.Config != nil {
		spec.Config(&cfg.Config)
		if len(layers) == 0 {
			cfg.History = append(cfg.History, ocispec.History{Created: &now, CreatedBy: spec.CreatedBy, Comment: spec.Message, EmptyLayer: true})
		}
	} else {
		cfg.Config.Env = spec.Env
		cfg.Config.WorkingDir = spec.Workdir
	}
	if cfg.OS == "" {
		cfg.Platform = ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH}
	}
	for _, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.Digest) // uncompressed: digest is the diff ID
		cfg.History = append(cfg.History, ocispec.History{Created: &now, CreatedBy: spec.CreatedBy, Comment: spec.Message})
	}
}

// writeManifest writes cfg and the manifest of the base layers plus the
// new ones to the content store, with the labels that keep what they
// reference from garbage collection, and returns the manifest's descriptor.
func (s *Store) writeManifest(ctx context.Context, cs content.Store, cfg ocispec.Image, base, layers []ocispec.Descriptor) (ocispec.Descriptor, error) {
	// The layers were unpacked as they were written (writeLayer); the
	// label keeps the top snapshot, and so the chain, as long as the image
	// (containerd's unpacker sets the same one).
	cfgDesc, err := writeJSON(ctx, cs, ocispec.MediaTypeImageConfig, cfg, map[string]string{
		"containerd.io/gc.ref.snapshot." + s.snapshotter: identity.ChainID(cfg.RootFS.DiffIDs).String(),
	})
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("write config: %w", err)
	}
	out := ocispec.Manifest{
		Versioned: ocispecs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfgDesc,
	}
	gcLabels := map[string]string{"containerd.io/gc.ref.content.config": cfgDesc.Digest.String()}
	for _, l := range append(base, layers...) {
		l.MediaType = ociLayerType(l.MediaType)
		gcLabels[fmt.Sprintf("containerd.io/gc.ref.content.l.%d", len(out.Layers))] = l.Digest.String()
		out.Layers = append(out.Layers, l)
	}
	mDesc, err := writeJSON(ctx, cs, ocispec.MediaTypeImageManifest, out, gcLabels)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("write manifest: %w", err)
	}
	return mDesc, nil
}

// writeLayer streams one uncompressed layer into the content store and,
// in the same pass, unpacks it into a snapshot on parent (the chain of the
// layers under it), committed under its own chain ID as containerd's
// unpacker would, so the image needs no second read of the blob. The
// upload runs beside the unpack (asyncWriter). The blob itself is
// committed later, by the returned pendingLayer.
func (s *Store) writeLayer(ctx context.Context, name, parent string, write func(io.Writer) error) (_ *pendingLayer, retErr error) {
	cs := s.c.ContentStore()
	ref := layerRef(name)
	w, abort, err := openLayerWriter(ctx, cs, ref)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			abort()
		}
	}()
	sn := s.c.SnapshotService(s.snapshotter)
	tmp, upper, lowers, remove, err := prepareLayer(ctx, sn, ref, parent)
	if err != nil {
		return nil, err
	}
	defer remove()

	up := newAsyncWriter(w)
	cw := &countingWriter{w: up}
	pr, pw := io.Pipe()
	applied := make(chan error, 1)
	go func() {
		err := layerdiff.Apply(ctx, upper, lowers, pr)
		if err == nil {
			_, err = io.Copy(io.Discard, pr) // the tar's end padding
		}
		pr.CloseWithError(err)
		applied <- err
	}()
	err = write(io.MultiWriter(cw, pw))
	pw.CloseWithError(err)
	if uerr := up.Close(); err == nil && uerr != nil {
		err = fmt.Errorf("upload: %w", uerr)
	}
	if aerr := <-applied; err == nil && aerr != nil {
		err = fmt.Errorf("unpack: %w", aerr)
	}
	if err != nil {
		return nil, err
	}
	return s.finishLayer(ctx, sn, cs, w, ref, tmp, parent, cw.n, abort)
}

// openLayerWriter opens the content store ingest ref of a new layer;
// abort closes and discards it.
func openLayerWriter(ctx context.Context, cs content.Store, ref string) (content.Writer, func(), error) {
	w, err := content.OpenWriter(ctx, cs, content.WithRef(ref))
	if err != nil {
		return nil, nil, fmt.Errorf("open layer writer: %w", err)
	}
	return w, func() {
		w.Close()
		_ = cs.Abort(context.WithoutCancel(ctx), ref)
	}, nil
}

// prepareLayer makes the temporary snapshot (key tmp, on parent) that a new
// layer is unpacked or copied into, and returns its overlay directories.
// remove deletes it; once finishLayer committed it, that is a no-op.
func prepareLayer(ctx context.Context, sn snapshots.Snapshotter, ref, parent string) (tmp, upper string, lowers []string, remove func(), err error) {
	tmp = "boxd-commit-tmp-" + ref
	ms, err := sn.Prepare(ctx, tmp, parent)
	if err != nil {
		return "", "", nil, nil, fmt.Errorf("prepare layer snapshot: %w", err)
	}
	remove = func() { _ = sn.Remove(context.WithoutCancel(ctx), tmp) }
	upper, lowers, err = layerdiff.OverlayDirs(ms)
	if err == nil && upper == "" {
		err = fmt.Errorf("layer snapshot has no overlay upperdir: %w", errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		remove()
		return "", "", nil, nil, err
	}
	return tmp, upper, lowers, remove, nil
}

// layerRef names the content store ingest of one new layer of image name.
func layerRef(name string) string {
	return fmt.Sprintf("boxd-commit-%s-%d", strings.NewReplacer("/", "_", ":", "_").Replace(name), time.Now().UnixNano())
}

// finishLayer commits the layer's snapshot tmp under its chain ID (parent
// and the digest of the n bytes w took) and returns the pending blob.
func (s *Store) finishLayer(ctx context.Context, sn snapshots.Snapshotter, cs content.Store, w content.Writer, ref, tmp, parent string, n int64, abort func()) (*pendingLayer, error) {
	d := w.Digest()
	chain := identity.ChainID([]digest.Digest{digest.Digest(parent), d}).String()
	if parent == "" {
		chain = d.String()
	}
	if err := sn.Commit(ctx, chain, tmp, snapshots.WithLabels(map[string]string{"containerd.io/snapshot.ref": chain})); err != nil && !errdefs.IsAlreadyExists(err) {
		return nil, fmt.Errorf("commit layer snapshot: %w", err)
	}
	p := &pendingLayer{desc: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: d, Size: n}, abort: abort}
	p.commit = func() error {
		defer w.Close()
		if err := w.Commit(ctx, n, d); err != nil && !errdefs.IsAlreadyExists(err) {
			_ = cs.Abort(context.WithoutCancel(ctx), ref)
			return fmt.Errorf("commit layer: %w", err)
		}
		return nil
	}
	return p, nil
}

// copyLayer makes one layer by copying: fill writes the layer's files
// into the upperdir of a new snapshot on parent (the chain of the layers
// under it) as unpacking its tar would, then the layer tar is written
// from that snapshot into the content store (uncompressed, so its digest
// is its diff ID) and the snapshot committed under its chain ID. So what
// fill reads (a sandbox's writable layer) need hold still only for the
// copy, not for the upload. The blob itself is committed later, by the
// returned pendingLayer.
func (s *Store) copyLayer(ctx context.Context, name, parent string, fill func(upper string) error) (_ *pendingLayer, retErr error) {
	sn := s.c.SnapshotService(s.snapshotter)
	ref := layerRef(name)
	tmp, upper, _, remove, err := prepareLayer(ctx, sn, ref, parent)
	if err != nil {
		return nil, err
	}
	defer remove()
	if err := fill(upper); err != nil {
		return nil, err
	}

	cs := s.c.ContentStore()
	w, abort, err := openLayerWriter(ctx, cs, ref)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			abort()
		}
	}()
	up := newAsyncWriter(w)
	cw := &countingWriter{w: up}
	err = s.withLowerRoot(ctx, sn, parent, func(lower string) error {
		return layerdiff.WriteDiff(ctx, cw, lower, upper, layerdiff.Shift{})
	})
	if uerr := up.Close(); err == nil && uerr != nil {
		err = fmt.Errorf("upload: %w", uerr)
	}
	if err != nil {
		return nil, err
	}
	return s.finishLayer(ctx, sn, cs, w, ref, tmp, parent, cw.n, abort)
}

// withLowerRoot runs f with the layers of the snapshot parent mounted
// read-only at a temporary directory (an empty one for no parent).
func (s *Store) withLowerRoot(ctx context.Context, sn snapshots.Snapshotter, parent string, f func(string) error) error {
	if parent == "" {
		dir, err := os.MkdirTemp("", "boxd-empty-")
		if err != nil {
			return err
		}
		defer os.Remove(dir)
		return f(dir)
	}
	viewKey := "boxd-diff-view-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ms, err := sn.View(ctx, viewKey, parent)
	if err != nil {
		return fmt.Errorf("view of %s: %w", parent, err)
	}
	defer func() { _ = sn.Remove(context.WithoutCancel(ctx), viewKey) }()
	for i := range ms {
		ms[i].Options = append(slices.Clone(ms[i].Options), "nodev", "nosuid", "noexec")
	}
	return mount.WithTempMount(ctx, ms, f)
}

// asyncWriter hands what is written to w in 1 MiB pieces from a goroutine
// of its own, up to 8 pieces ahead (at most 10 pieces exist: 8 queued, one
// being written, one filling, so the free list never blocks): the content store's writer answers each
// write with a round trip, which then overlaps with the diff and the
// unpack instead of stopping them.
type asyncWriter struct {
	w    io.Writer
	cur  []byte
	ch   chan []byte
	free chan []byte
	done chan error
	err  error
}

const asyncPiece = 1 << 20

func newAsyncWriter(w io.Writer) *asyncWriter {
	a := &asyncWriter{w: w, ch: make(chan []byte, 8), free: make(chan []byte, 16), done: make(chan error, 1)}
	go func() {
		var err error
		for b := range a.ch {
			if err == nil {
				_, err = a.w.Write(b)
			}
			a.free <- b[:0]
		}
		a.done <- err
	}()
	return a
}

func (a *asyncWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if a.cur == nil {
			select {
			case a.cur = <-a.free:
			default:
				a.cur = make([]byte, 0, asyncPiece)
			}
		}
		k := copy(a.cur[len(a.cur):cap(a.cur)], p)
		a.cur, p = a.cur[:len(a.cur)+k], p[k:]
		if len(a.cur) == cap(a.cur) {
			a.ch <- a.cur
			a.cur = nil
		}
	}
	return n, nil
}

// Close writes what is left and returns the first write error.
func (a *asyncWriter) Close() error {
	if len(a.cur) > 0 {
		a.ch <- a.cur
		a.cur = nil
	}
	close(a.ch)
	return <-a.done
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Describe returns what boxd reports about a stored image record.
func (s *Store) Describe(ctx context.Context, rec images.Image) (Image, error) {
	return s.describe(ctx, client.NewImageWithPlatform(s.c, rec, platformMatcher()))
}
