//go:build linux

package snapshot

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
)

// TagImage points target at source's image, as docker tag does: the same
// manifest (digest), no content copied. Errors name the field: source or
// target not a valid reference (invalid_argument), no image source
// (not_found), target existing without opts.Force (already_exists). The
// record gets the audit labels of an import (LabelImportedBy, or the
// replace labels with force).
func (s *Store) TagImage(ctx context.Context, source, target string, opts WriteOptions) (Image, error) {
	src, err := NormalizeName(source)
	if err != nil {
		return Image{}, fmt.Errorf("source: %w", err)
	}
	dst, err := NormalizeName(target)
	if err != nil {
		return Image{}, fmt.Errorf("target: %w", err)
	}
	rec, err := s.c.ImageService().Get(ctx, src)
	// A build step's cache record is no image anyone named (List hides it).
	if errdefs.IsNotFound(err) || err == nil && rec.Labels[LabelBuildCache] != "" {
		return Image{}, fmt.Errorf("source: image %q not found: %w", source, errdefs.ErrNotFound)
	}
	if err != nil {
		return Image{}, fmt.Errorf("source: image %s: %w", src, err)
	}
	if !opts.Force {
		old, err := s.c.ImageService().Get(ctx, dst)
		switch {
		case err == nil:
			return Image{}, fmt.Errorf("target: image %q already exists (%s); tag with force to replace it (boxctl image tag --force): %w",
				dst, old.Target.Digest, errdefs.ErrAlreadyExists)
		case !errdefs.IsNotFound(err):
			return Image{}, fmt.Errorf("target: image %s: %w", dst, err)
		}
	}
	img, err := s.Tag(ctx, dst, rec, nil, opts)
	if err != nil {
		return Image{}, fmt.Errorf("tag %s as %s: %w", src, dst, err)
	}
	return img, nil
}
