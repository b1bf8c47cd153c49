//go:build linux

// Room: lifecycle. Rename: a sandbox's name changes (the Docker
// endpoint's container rename).

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// Rename gives a sandbox a new name, unique among its owner's as a
// create's is; the name lives in the boxd.io/name label only.
func (m *Manager) Rename(ctx context.Context, idOrName, name string) (*Sandbox, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	if name == "" || len(name) > maxNameLen || !nameRe.MatchString(name) {
		return nil, fieldErr("name", "%q is not a valid name (letters, digits, _ . -; at most %d characters)", name, maxNameLen)
	}
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return nil, fmt.Errorf("rename %s: %w", ctr.ID(), err)
	}
	owner := ownerOf(labels)
	// The create of a sandbox of that name, or another rename to it,
	// holds this key meanwhile.
	key := fmt.Sprintf("name:%d:%s", owner, name)
	if !m.claim(key) {
		return nil, fmt.Errorf("a sandbox named %q is being created: %w", name, errdefs.ErrAlreadyExists)
	}
	defer m.release(key)
	other, err := m.find(WithCaller(ctx, Caller{UID: owner}), name)
	switch {
	case err == nil && other.ID() == ctr.ID():
		return m.Get(ctx, ctr.ID())
	case err == nil:
		return nil, fmt.Errorf("a sandbox named %q already exists: %w", name, errdefs.ErrAlreadyExists)
	case !errdefs.IsNotFound(err):
		return nil, err
	}
	// The record (the boxd.io/sandbox label) names it too; Update and
	// others rewrite it holding the sandbox's id.
	id := ctr.ID()
	if !m.claimWait(ctx, id, 5*time.Second) {
		return nil, fmt.Errorf("sandbox %s is busy: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	if labels, err = ctr.Labels(ctx); err != nil {
		return nil, fmt.Errorf("rename %s: %w", id, err)
	}
	var rec record
	if err := json.Unmarshal([]byte(labels[LabelSandbox]), &rec); err != nil {
		return nil, fmt.Errorf("rename %s: corrupt %s label: %w", id, LabelSandbox, err)
	}
	rec.Name = name
	recJSON, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("rename %s: %w", id, err)
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelName: name, LabelSandbox: string(recJSON)}); err != nil {
		return nil, fmt.Errorf("rename %s: %w", id, err)
	}
	m.log.Info("renamed", "sandbox", id, "name", name)
	return m.Get(ctx, id)
}
