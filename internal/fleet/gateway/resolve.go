//go:build linux

package gateway

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
)

// boxdIDField indexes Sandbox resources by status.boxdID.
const boxdIDField = "status.boxdID"

// KubeResolver finds sandboxes in the API server's Sandbox resources,
// through an informer cache (a call costs no API request), and on a miss
// once more from the API server itself (a sandbox created a moment ago).
type KubeResolver struct {
	Cache  cache.Cache
	Direct client.Reader
}

// IndexSandboxes adds the index KubeResolver needs; call before the cache
// starts.
func IndexSandboxes(ctx context.Context, c cache.Cache) error {
	return c.IndexField(ctx, &fleetv1.Sandbox{}, boxdIDField, func(o client.Object) []string {
		if id := o.(*fleetv1.Sandbox).Status.BoxdID; id != "" {
			return []string{id}
		}
		return nil
	})
}

// Resolve returns the address of the node that has sandbox id.
func (k *KubeResolver) Resolve(ctx context.Context, id string) (string, error) {
	var list fleetv1.SandboxList
	if err := k.Cache.List(ctx, &list, client.MatchingFields{boxdIDField: id}); err != nil {
		return "", fmt.Errorf("look up sandbox %s: %w", id, err)
	}
	sb := first(list.Items, id)
	if sb == nil {
		if err := k.Direct.List(ctx, &list); err != nil {
			return "", fmt.Errorf("look up sandbox %s: %w", id, err)
		}
		if sb = first(list.Items, id); sb == nil {
			return "", errUnknown(id)
		}
	}
	var node fleetv1.BoxdNode
	if err := k.Cache.Get(ctx, types.NamespacedName{Name: sb.Status.Node}, &node); err != nil {
		return "", errUnknown(id)
	}
	return node.Spec.Address, nil
}

func first(items []fleetv1.Sandbox, id string) *fleetv1.Sandbox {
	for i := range items {
		if items[i].Status.BoxdID == id && items[i].Status.Node != "" {
			return &items[i]
		}
	}
	return nil
}
