//go:build linux

package snapshot

import (
	"context"

	"github.com/containerd/containerd/v2/core/images"
)

// LabelBuildCache marks an image record that is a build step's cached
// result (runtime's Build): it is kept for the next build and left out of
// image lists.
const LabelBuildCache = "boxd.io/build-cache"

// Tag points name at an existing image's target (a finished build), with
// the audit labels of an import plus labels; an existing name is refused
// unless opts.Force.
func (s *Store) Tag(ctx context.Context, name string, target images.Image, labels map[string]string, opts WriteOptions) (Image, error) {
	n, err := s.CheckWritable(ctx, name, opts)
	if err != nil {
		return Image{}, err
	}
	imgs, err := s.commit(ctx, []images.Image{{Name: n, Target: target.Target, Labels: labels}}, opts)
	if err != nil {
		return Image{}, err
	}
	return imgs[0], nil
}
