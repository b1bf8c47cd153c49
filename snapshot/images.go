// Package snapshot manages boxd's images in containerd: importing archives,
// turning a root filesystem into a one-layer image, listing and removing.
package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Image is what boxd reports about an image.
type Image struct {
	Name      string
	Digest    string
	Size      int64
	CreatedAt time.Time
	// Labels are the image record's labels, boxd's audit labels
	// (LabelImportedBy, ...) among them.
	Labels map[string]string
	// Replaced is, after an import that replaced an image, the digest the
	// name pointed at before.
	Replaced string
}

// Store imports, lists and removes images in boxd's containerd namespace and
// keeps them unpacked for the snapshotter sandboxes use.
type Store struct {
	c           *client.Client
	snapshotter string
}

// New returns a Store that unpacks into snapshotter (e.g. "overlayfs").
func New(c *client.Client, snapshotter string) *Store {
	return &Store{c: c, snapshotter: snapshotter}
}

// Snapshotter is the snapshotter images are unpacked for.
func (s *Store) Snapshotter() string { return s.snapshotter }

var refPattern = regexp.MustCompile(`^[a-z0-9][a-zA-Z0-9._/:@+-]{0,254}$`)

// NormalizeName validates an image reference and adds ":latest" when it has
// neither tag nor digest, so "busybox" and "busybox:latest" name one image.
func NormalizeName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("image name is empty: %w", errdefs.ErrInvalidArgument)
	}
	if !refPattern.MatchString(name) || strings.Contains(name, "..") || strings.Contains(name, "//") {
		return "", fmt.Errorf("image name %q is not a valid reference (lowercase letters, digits, . _ / : @ + -; at most 255 characters): %w", name, errdefs.ErrInvalidArgument)
	}
	if strings.Contains(name, "@") {
		return name, nil
	}
	last := name[strings.LastIndex(name, "/")+1:]
	if !strings.Contains(last, ":") {
		name += ":latest"
	}
	return name, nil
}

// ImportArchive imports an OCI-layout or docker-archive tar read from r. If
// name is set the archive must hold exactly one image, which gets that name
// and no other; otherwise each image gets the name the archive gives it.
// A name that already exists is refused unless opts.Force; the content is
// stored and unpacked before any name points at it (see commit).
func (s *Store) ImportArchive(ctx context.Context, r io.Reader, name string, opts WriteOptions) ([]Image, error) {
	if name != "" {
		n, err := NormalizeName(name)
		if err != nil {
			return nil, err
		}
		name = n
		// Refuse before the upload, not after it.
		if err := s.checkWritable(ctx, name, opts); err != nil {
			return nil, err
		}
	}
	ctx, done, err := s.c.WithLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("import image archive: lease: %w", err)
	}
	defer done(context.WithoutCancel(ctx))
	if r, err = sniffTar(r); err != nil {
		return nil, fmt.Errorf("import image archive: %w", err)
	}
	index, err := archive.ImportIndex(ctx, s.c.ContentStore(), r)
	if err != nil {
		return nil, fmt.Errorf("import image archive: %w", wrapInvalid(err))
	}
	recs, err := s.archiveImages(ctx, index, name)
	if err != nil {
		return nil, fmt.Errorf("import image archive: %w", err)
	}
	return s.commit(ctx, recs, opts)
}

// ImportRootfs turns a tar of a root filesystem into a single-layer image
// named name. The tar is streamed into the content store, never held whole.
// An existing name is refused unless opts.Force.
func (s *Store) ImportRootfs(ctx context.Context, r io.Reader, name string, opts WriteOptions) (Image, error) {
	name, err := NormalizeName(name)
	if err != nil {
		return Image{}, err
	}
	if err := s.checkWritable(ctx, name, opts); err != nil {
		return Image{}, err
	}
	ctx, done, err := s.c.WithLease(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("import rootfs %s: lease: %w", name, err)
	}
	defer done(context.WithoutCancel(ctx))
	cs := s.c.ContentStore()

	// The layer is stored uncompressed, so its digest is also its diff ID.
	ref := fmt.Sprintf("boxd-rootfs-%s-%d", strings.NewReplacer("/", "_", ":", "_").Replace(name), time.Now().UnixNano())
	w, err := content.OpenWriter(ctx, cs, content.WithRef(ref))
	if err != nil {
		return Image{}, fmt.Errorf("import rootfs %s: open layer writer: %w", name, err)
	}
	n, err := io.Copy(w, r)
	if err != nil {
		w.Close()
		_ = cs.Abort(context.WithoutCancel(ctx), ref)
		return Image{}, fmt.Errorf("import rootfs %s: read layer: %w", name, err)
	}
	if n == 0 {
		w.Close()
		_ = cs.Abort(context.WithoutCancel(ctx), ref)
		return Image{}, fmt.Errorf("import rootfs %s: the rootfs tar is empty: %w", name, errdefs.ErrInvalidArgument)
	}
	layerDigest := w.Digest()
	if err := w.Commit(ctx, n, layerDigest); err != nil && !errdefs.IsAlreadyExists(err) {
		w.Close()
		return Image{}, fmt.Errorf("import rootfs %s: commit layer: %w", name, err)
	}
	w.Close()
	layer := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: layerDigest, Size: n}

	now := time.Now().UTC()
	plat := ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH}
	cfg := ocispec.Image{
		Created:  &now,
		Platform: plat,
		Config: ocispec.ImageConfig{
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cmd:        []string{"/bin/sh"},
			WorkingDir: "/workspace",
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDigest}},
	}
	cfgDesc, err := writeJSON(ctx, cs, ocispec.MediaTypeImageConfig, cfg, nil)
	if err != nil {
		return Image{}, fmt.Errorf("import rootfs %s: write config: %w", name, err)
	}
	manifest := ocispec.Manifest{
		Versioned: ocispecs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfgDesc,
		Layers:    []ocispec.Descriptor{layer},
	}
	// The gc.ref labels keep config and layer alive as long as the manifest is.
	mDesc, err := writeJSON(ctx, cs, ocispec.MediaTypeImageManifest, manifest, map[string]string{
		"containerd.io/gc.ref.content.config": cfgDesc.Digest.String(),
		"containerd.io/gc.ref.content.l.0":    layerDigest.String(),
	})
	if err != nil {
		return Image{}, fmt.Errorf("import rootfs %s: write manifest: %w", name, err)
	}
	mDesc.Platform = &plat

	imgs, err := s.commit(ctx, []images.Image{{Name: name, Target: mDesc}}, opts)
	if err != nil {
		return Image{}, err
	}
	return imgs[0], nil
}

func writeJSON(ctx context.Context, cs content.Store, mediaType string, v any, labels map[string]string) (ocispec.Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	var opts []content.Opt
	if labels != nil {
		opts = append(opts, content.WithLabels(labels))
	}
	if err := content.WriteBlob(ctx, cs, desc.Digest.String(), strings.NewReader(string(b)), desc, opts...); err != nil {
		return ocispec.Descriptor{}, err
	}
	return desc, nil
}

func (s *Store) describe(ctx context.Context, img client.Image) (Image, error) {
	size, err := img.Size(ctx)
	if err != nil {
		size = -1
	}
	return Image{Name: img.Name(), Digest: img.Target().Digest.String(), Size: size, CreatedAt: img.Metadata().CreatedAt, Labels: img.Labels()}, nil
}

// Client is the containerd client the store works through.
func (s *Store) Client() *client.Client { return s.c }

// Current reports whether name already points at digest, unpacked; then
// it also returns the image, so a pull of an unchanged image is a no-op.
func (s *Store) Current(ctx context.Context, name, digest string) (Image, bool, error) {
	rec, err := s.c.ImageService().Get(ctx, name)
	if errdefs.IsNotFound(err) {
		return Image{}, false, nil
	}
	if err != nil {
		return Image{}, false, fmt.Errorf("image %s: %w", name, err)
	}
	if rec.Target.Digest.String() != digest {
		return Image{}, false, nil
	}
	img := client.NewImageWithPlatform(s.c, rec, platformMatcher())
	if ok, err := img.IsUnpacked(ctx, s.snapshotter); err != nil || !ok {
		return Image{}, false, nil
	}
	d, err := s.describe(ctx, img)
	return d, err == nil, err
}

// Get returns an unpacked image by name; a missing image is errdefs.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (client.Image, error) {
	n, err := NormalizeName(name)
	if err != nil {
		return nil, err
	}
	rec, err := s.c.ImageService().Get(ctx, n)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %q not found (import it with boxctl image import): %w", name, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("image %s: %w", name, err)
	}
	img := client.NewImageWithPlatform(s.c, rec, platformMatcher())
	ok, err := img.IsUnpacked(ctx, s.snapshotter)
	if err != nil {
		return nil, fmt.Errorf("image %s: check unpacked: %w", name, err)
	}
	if !ok {
		if err := img.Unpack(ctx, s.snapshotter); err != nil {
			return nil, fmt.Errorf("image %s: unpack: %w", name, err)
		}
	}
	return img, nil
}

// List returns every image in the namespace, sorted by name.
func (s *Store) List(ctx context.Context) ([]Image, error) {
	recs, err := s.c.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make([]Image, 0, len(recs))
	for _, rec := range recs {
		if rec.Labels[LabelBuildCache] != "" {
			continue // a build step's cache, not an image anyone named
		}
		d, err := s.describe(ctx, client.NewImageWithPlatform(s.c, rec, platformMatcher()))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Remove deletes an image record; containerd's garbage collector then frees
// blobs and snapshots no sandbox uses any more. An image that sandboxes use
// (opts.Users) is refused with failed_precondition unless opts.Force; the
// sandboxes keep running on their own snapshots either way. It returns the
// ids of the sandboxes that used the image.
func (s *Store) Remove(ctx context.Context, name string, opts WriteOptions) ([]string, error) {
	n, err := NormalizeName(name)
	if err != nil {
		return nil, err
	}
	is := s.c.ImageService()
	if _, err := is.Get(ctx, n); err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %q not found: %w", name, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("remove image %s: %w", name, err)
	}
	users, err := opts.users(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("remove image %s: %w", n, err)
	}
	if len(users) > 0 && !opts.Force {
		return users, fmt.Errorf("image %q is used by %s; remove them first, or force the removal (boxctl image rm --force; they keep running on their own copy): %w",
			n, describeUsers(users), errdefs.ErrFailedPrecondition)
	}
	if err := is.Delete(ctx, n, images.SynchronousDelete()); err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("image %q not found: %w", name, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("remove image %s: %w", name, err)
	}
	return users, nil
}

// wrapInvalid marks archive parse failures as the caller's fault, so they
// reach clients as invalid_argument instead of internal.
func wrapInvalid(err error) error {
	if errdefs.IsNotFound(err) || errdefs.IsInvalidArgument(err) || errdefs.IsAlreadyExists(err) {
		return err
	}
	msg := err.Error()
	for _, s := range []string{"tar", "unexpected EOF", "invalid", "unsupported", "unknown", "no manifest", "json"} {
		if strings.Contains(msg, s) {
			return fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument)
		}
	}
	return err
}
