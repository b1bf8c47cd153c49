//go:build linux

// Room: create. The cache of image configs a create reads.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/containerd/containerd/v2/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// maxCachedSpecs bounds imageSpecCache; past it the cache starts over.
const maxCachedSpecs = 256

// imageSpecCache holds image configs as JSON by target digest. Each get
// decodes its own copy, so no two creates share the config's slices.
type imageSpecCache struct {
	mu sync.Mutex
	by map[string][]byte
}

func (c *imageSpecCache) get(ctx context.Context, img client.Image) (ocispec.Image, error) {
	key := img.Target().Digest.String()
	c.mu.Lock()
	b, ok := c.by[key]
	c.mu.Unlock()
	if !ok {
		spec, err := img.Spec(ctx)
		if err != nil {
			return ocispec.Image{}, err
		}
		if b, err = json.Marshal(spec); err != nil {
			return ocispec.Image{}, fmt.Errorf("image config: %w", err)
		}
		c.mu.Lock()
		if c.by == nil || len(c.by) >= maxCachedSpecs {
			c.by = map[string][]byte{}
		}
		c.by[key] = b
		c.mu.Unlock()
	}
	var spec ocispec.Image
	if err := json.Unmarshal(b, &spec); err != nil {
		return ocispec.Image{}, fmt.Errorf("image config: %w", err)
	}
	return spec, nil
}
