//go:build linux

// Room: images. Which sandboxes run on an image (the image store asks
// before it replaces or removes one).

package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/snapshot"
)

var _ snapshot.Users = (*Manager)(nil)

// ImageUsers returns the ids of the sandboxes whose record names image (a
// normalized name), so the image store can refuse to replace or remove an
// image that sandboxes run on. A container whose
// record cannot be read counts if containerd's own image field names the
// image: when unsure, the image is in use.
func (m *Manager) ImageUsers(ctx context.Context, image string) ([]string, error) {
	// Two filters match either label.
	ctrs, err := m.cfg.Client.Containers(ctx,
		fmt.Sprintf(`labels."%s"==true`, LabelManaged), fmt.Sprintf(`labels."%s"`, LabelPool), fmt.Sprintf(`labels."%s"`, LabelDeleting))
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	var ids []string
	for _, ctr := range ctrs {
		info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("inspect sandbox %s: %w", ctr.ID(), err)
		}
		// A sandbox deleted in the background (boxctl run) is gone for
		// its user; its teardown does not need the image record (like a
		// forced removal's sandboxes, it runs on its own snapshot), so
		// `boxctl run --image X` then `boxctl image rm X` works.
		if info.Labels[LabelDeleting] != "" {
			continue
		}
		var rec record
		if err := json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec); err != nil {
			rec.Image = info.Image
		}
		// Warm-pool members are boxd's own and never ran code: a removal
		// destroys them (DropPoolMembers) instead of being refused.
		if info.Labels[LabelPool] != "" {
			continue
		}
		if rec.Image == image {
			ids = append(ids, ctr.ID())
		}
	}
	return ids, nil
}
