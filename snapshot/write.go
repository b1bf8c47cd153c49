package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Audit labels boxd keeps on each image record, so `boxctl image ls --json`
// shows who put an image under its name and who replaced it. A caller is
// written as "uid=U pid=P", from SO_PEERCRED on the API socket.
const (
	// LabelImportedBy and LabelImportedAt (RFC 3339) record the import
	// that created the name; a forced replace keeps them.
	LabelImportedBy = "boxd.io/imported-by"
	LabelImportedAt = "boxd.io/imported-at"
	// LabelReplacedBy, LabelReplacedAt and LabelReplacedDigest record the
	// latest forced replace and the digest the name pointed at before it.
	LabelReplacedBy     = "boxd.io/replaced-by"
	LabelReplacedAt     = "boxd.io/replaced-at"
	LabelReplacedDigest = "boxd.io/replaced-digest"
	// LabelPulledFrom records, on a pulled image, the reference and
	// digest it came from ("REF@DIGEST"); a later import over the name
	// drops it.
	LabelPulledFrom = "boxd.io/pulled-from"
	// LabelReplacedInUse lists the sandboxes that used the image when a
	// forced replace went over them (absent when none did).
	LabelReplacedInUse = "boxd.io/replaced-in-use"
)

// maxListedUsers bounds how many sandbox ids an error or a label names.
const maxListedUsers = 10

// Users reports which sandboxes use an image. runtime.Manager implements
// it; snapshot cannot import runtime (runtime imports snapshot), so the
// caller hands it in.
type Users interface {
	// ImageUsers returns the ids of the sandboxes (warm-pool members
	// included) whose record names image, a normalized name.
	ImageUsers(ctx context.Context, image string) ([]string, error)
}

// WriteOptions say how an import or a removal may treat an image that
// exists or is in use.
type WriteOptions struct {
	// Force replaces an existing name, and replaces or removes an image
	// that sandboxes use. Without it both are refused.
	Force bool
	// Caller is who asks ("uid=1000 pid=123"), for the audit labels.
	Caller string
	// Users finds the sandboxes that use an image; nil finds none.
	Users Users
}

func (o WriteOptions) users(ctx context.Context, name string) ([]string, error) {
	if o.Users == nil {
		return nil, nil
	}
	ids, err := o.Users.ImageUsers(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("find the sandboxes using %s: %w", name, err)
	}
	slices.Sort(ids)
	return ids, nil
}

func (o WriteOptions) caller() string {
	if o.Caller == "" {
		return "unknown"
	}
	return o.Caller
}

// describeUsers names at most maxListedUsers sandboxes: "2 sandboxes (a, b)".
func describeUsers(ids []string) string {
	noun := "sandboxes"
	if len(ids) == 1 {
		noun = "sandbox"
	}
	return fmt.Sprintf("%d %s (%s)", len(ids), noun, listUsers(ids))
}

// listUsers joins at most maxListedUsers ids, saying how many it left out.
func listUsers(ids []string) string {
	if len(ids) <= maxListedUsers {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:maxListedUsers], ", ") + fmt.Sprintf(" and %d more", len(ids)-maxListedUsers)
}

// checkWritable refuses an existing name unless opts.Force, naming the
// image and the sandboxes that use it.
func (s *Store) checkWritable(ctx context.Context, name string, opts WriteOptions) error {
	if opts.Force {
		return nil
	}
	old, err := s.c.ImageService().Get(ctx, name)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("image %s: %w", name, err)
	}
	return s.existsError(ctx, old, opts)
}

func (s *Store) existsError(ctx context.Context, old images.Image, opts WriteOptions) error {
	used := ""
	if ids, err := opts.users(ctx, old.Name); err == nil && len(ids) > 0 {
		used = ", used by " + describeUsers(ids)
	}
	return fmt.Errorf("image %q already exists (%s%s); import with force to replace it (boxctl image import --force): %w",
		old.Name, old.Target.Digest, used, errdefs.ErrAlreadyExists)
}

// archiveImages names the images an imported archive index holds: all of
// them name when it is set (then the archive must hold exactly one image),
// else the name each carries in its annotations, normalized like any name.
// Their content is labelled for the garbage collector as containerd's own
// import does.
func (s *Store) archiveImages(ctx context.Context, index ocispec.Descriptor, name string) ([]images.Image, error) {
	cs := s.c.ContentStore()
	match := platformMatcher()
	var found []ocispec.Descriptor
	handler := images.HandlerFunc(func(ctx context.Context, desc ocispec.Descriptor) ([]ocispec.Descriptor, error) {
		if desc.Digest != index.Digest {
			return images.Children(ctx, cs, desc)
		}
		b, err := content.ReadBlob(ctx, cs, desc)
		if err != nil {
			return nil, err
		}
		var idx ocispec.Index
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("archive index: %w", err)
		}
		for _, m := range idx.Manifests {
			if _, ok := m.Annotations[images.AnnotationManifestSubject]; ok {
				continue // a referrer (signature, SBOM), not an image
			}
			if m.Platform != nil && !match.Match(*m.Platform) {
				continue
			}
			found = append(found, m)
		}
		return idx.Manifests, nil
	})
	if err := images.WalkNotEmpty(ctx, images.SetChildrenLabels(cs, images.FilterPlatforms(handler, match)), index); err != nil {
		return nil, wrapInvalid(err)
	}
	if name != "" {
		digests := map[string]bool{}
		for _, m := range found {
			digests[m.Digest.String()] = true
		}
		switch len(digests) {
		case 0:
			return nil, fmt.Errorf("the archive holds no image for this host (%s): %w", platforms.Format(platforms.DefaultSpec()), errdefs.ErrInvalidArgument)
		case 1:
			return []images.Image{{Name: name, Target: found[0]}}, nil
		}
		return nil, fmt.Errorf("the archive holds %d images; a name can be given to one only (import it without a name): %w", len(digests), errdefs.ErrInvalidArgument)
	}
	byName := map[string]images.Image{}
	for _, m := range found {
		ref := m.Annotations[images.AnnotationImageName]
		if ref == "" {
			ref = m.Annotations[ocispec.AnnotationRefName]
		}
		if ref == "" {
			continue
		}
		n, err := NormalizeName(ref)
		if err != nil {
			return nil, fmt.Errorf("the archive names an image %q: %w", ref, err)
		}
		if prev, ok := byName[n]; ok && prev.Target.Digest != m.Digest {
			return nil, fmt.Errorf("the archive names two different images %s: %w", n, errdefs.ErrInvalidArgument)
		}
		byName[n] = images.Image{Name: n, Target: m}
	}
	if len(byName) == 0 {
		return nil, fmt.Errorf("the archive names no image (pass a name): %w", errdefs.ErrInvalidArgument)
	}
	return slices.SortedFunc(maps.Values(byName), func(a, b images.Image) int { return strings.Compare(a.Name, b.Name) }), nil
}

// Record names content already in the content store (a registry pull
// fetched it under the lease in ctx) as an import does: unpacked first,
// then the records, all or nothing; an existing name only with Force.
func (s *Store) Record(ctx context.Context, recs []images.Image, opts WriteOptions) ([]Image, error) {
	return s.commit(ctx, recs, opts)
}

// commit points each rec's name at its target, all or nothing. ctx holds
// the lease that keeps the new content alive. The images are unpacked
// first, so a name never points at content that is not ready: a reader
// sees the old image until the record's target changes, then the new one,
// and a failure anywhere leaves the old images as they were. Sandboxes
// already running keep their snapshots of the old image.
func (s *Store) commit(ctx context.Context, recs []images.Image, opts WriteOptions) ([]Image, error) {
	is := s.c.ImageService()
	olds := make([]*images.Image, len(recs))
	for i, rec := range recs {
		old, err := is.Get(ctx, rec.Name)
		switch {
		case errdefs.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("image %s: %w", rec.Name, err)
		case !opts.Force:
			return nil, s.existsError(ctx, old, opts)
		default:
			olds[i] = &old
		}
	}
	for _, rec := range recs {
		if err := s.unpack(ctx, rec); err != nil {
			return nil, err
		}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	var undo []func(context.Context)
	rollback := func() {
		uctx := context.WithoutCancel(ctx)
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](uctx)
		}
	}
	out := make([]Image, 0, len(recs))
	for i, rec := range recs {
		old := olds[i]
		var (
			written images.Image
			err     error
		)
		if old == nil {
			extra := rec.Labels
			rec.Labels = map[string]string{LabelImportedBy: opts.caller(), LabelImportedAt: now}
			maps.Copy(rec.Labels, extra)
			// Create fails if another import made the name meanwhile.
			written, err = is.Create(ctx, rec)
			if errdefs.IsAlreadyExists(err) {
				err = fmt.Errorf("image %q was created by another import meanwhile: %w", rec.Name, errdefs.ErrAlreadyExists)
			}
			if err == nil {
				undo = append(undo, func(c context.Context) { _ = is.Delete(c, rec.Name) })
			}
		} else {
			extra := rec.Labels
			if rec.Labels, err = replaceLabels(ctx, *old, opts, now); err == nil {
				maps.Copy(rec.Labels, extra)
				written, err = is.Update(ctx, rec, "target", "labels")
			}
			if err == nil {
				undo = append(undo, func(c context.Context) { _, _ = is.Update(c, *old, "target", "labels") })
			}
		}
		if err != nil {
			rollback()
			return nil, fmt.Errorf("image %s: record: %w", rec.Name, err)
		}
		d, err := s.describe(ctx, client.NewImageWithPlatform(s.c, written, platformMatcher()))
		if err != nil {
			rollback()
			return nil, err
		}
		if old != nil {
			d.Replaced = old.Target.Digest.String()
		}
		out = append(out, d)
	}
	return out, nil
}

// replaceLabels are the labels of a forcibly replaced image: the old
// record's (the original import's audit among them) and this replace's.
func replaceLabels(ctx context.Context, old images.Image, opts WriteOptions, now string) (map[string]string, error) {
	users, err := opts.users(ctx, old.Name)
	if err != nil {
		return nil, err
	}
	l := maps.Clone(old.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[LabelReplacedBy], l[LabelReplacedAt], l[LabelReplacedDigest] = opts.caller(), now, old.Target.Digest.String()
	delete(l, LabelPulledFrom) // the new content's origin, if any, comes with the record
	delete(l, LabelReplacedInUse)
	if len(users) > 0 {
		l[LabelReplacedInUse] = listUsers(users)
	}
	return l, nil
}

// unpack makes rec's layers into snapshots before any name points at them.
func (s *Store) unpack(ctx context.Context, rec images.Image) error {
	img := client.NewImageWithPlatform(s.c, rec, platformMatcher())
	ok, err := img.IsUnpacked(ctx, s.snapshotter)
	if err != nil {
		return fmt.Errorf("image %s: check unpacked: %w", rec.Name, wrapInvalid(err))
	}
	if !ok {
		if err := img.Unpack(ctx, s.snapshotter); err != nil {
			return fmt.Errorf("image %s: unpack: %w", rec.Name, wrapInvalid(err))
		}
	}
	return nil
}
