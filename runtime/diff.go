//go:build linux

// Room: diff. What changed in a sandbox's files: its writable layer (and
// the fork layers under it) against the image it was made from, the fork
// layer it started on, or a commit made from it.

package runtime

import (
	"context"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/image-spec/identity"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/internal/layerdiff"
	"github.com/boxd-dev/boxd/snapshot"
)

// Bounds on one diff. A listing or patch past them is cut and says so.
const (
	// MaxDiffChanges is how many changed paths one diff lists.
	MaxDiffChanges = 100_000
	// MaxDiffScan is how many directory entries one diff looks at.
	MaxDiffScan = 1_000_000
	// MaxDiffFilePatch bounds a file a patch is made of, and its patch.
	MaxDiffFilePatch = 1 << 20
	// MaxDiffPatch bounds all of one diff's patches together.
	MaxDiffPatch = 16 << 20
	// maxDiffCompare bounds the bytes read to compare files against a
	// commit's copy of them.
	maxDiffCompare = 1 << 30
)

// The states a diff compares a sandbox's files against (DiffRequest.Since);
// anything else names an image committed from the sandbox.
const (
	DiffSinceCreate = "create"
	DiffSinceFork   = "fork"
)

// DiffRequest asks what changed in a sandbox's files.
type DiffRequest struct {
	Sandbox string // id or name
	// Since: DiffSinceCreate (the default: the image the sandbox, or the
	// sandbox it was forked from, was made from), DiffSinceFork (the
	// source's files when this sandbox was forked from it), or the name
	// of an image committed from this sandbox.
	Since string
	Patch bool
}

// DiffResult is what Diff found.
type DiffResult struct {
	layerdiff.DiffResult
	Since string // what the changes are relative to, as asked
}

// Diff lists the paths added, modified and deleted in a sandbox's files
// since req.Since, from its layers: only the writable layer (and fork
// layers) are walked, the image's layers only looked up beside what they
// hold. Volumes and binds are not in the layers and not listed. The
// sandbox runs on meanwhile (a path it changes during the diff may show
// either state); it may be stopped.
func (m *Manager) Diff(ctx context.Context, req DiffRequest) (*DiffResult, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	if req.Since == "" {
		req.Since = DiffSinceCreate
	}
	ctr, err := m.find(ctx, req.Sandbox)
	if err != nil {
		return nil, err
	}
	id := ctr.ID()
	if m.isGvisor(id) {
		return nil, gvRefuse("diff", gvNoHostLayer)
	}
	if err := layerdiff.CheckOverlay(); err != nil {
		return nil, err
	}
	// Held so the sandbox is not deleted (its layer unmounted) under the
	// walk.
	if !m.claimWait(ctx, id, 5*time.Second) {
		return nil, fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	if err := m.ensureDisk(ctx, ctr); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	src, err := m.loadSource(ctx, ctr)
	if err != nil {
		return nil, err
	}
	newStack, err := sandboxStack(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	oldStack, cleanup, err := m.diffBase(ctx, id, src, newStack, req.Since)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	t0 := time.Now()
	res, err := layerdiff.Changes(ctx, oldStack, newStack, layerdiff.DiffOptions{
		MaxChanges: MaxDiffChanges, MaxScan: MaxDiffScan, Patch: req.Patch,
		MaxFilePatch: MaxDiffFilePatch, MaxPatch: MaxDiffPatch, MaxCompare: maxDiffCompare,
	})
	if err != nil {
		return nil, fmt.Errorf("diff sandbox %s: %w", id, err)
	}
	spec, err := ctr.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: spec: %w", id, err)
	}
	res.Changes = withoutMounts(res.Changes, spec.Mounts)
	m.log.Debug("diff", "sandbox", id, "since", req.Since, "changes", len(res.Changes), "scanned", res.Scanned,
		"truncated", res.Truncated, "took", time.Since(t0).Round(time.Microsecond))
	return &DiffResult{DiffResult: res, Since: req.Since}, nil
}

// sandboxStack is a sandbox's rootfs as overlay layers, top first: its
// writable layer (in its shifted ids), the fork layers under it, then its
// image's layers.
func sandboxStack(ctx context.Context, src *source) ([]layerdiff.Layer, error) {
	ms, err := src.sn.Mounts(ctx, src.key)
	if err != nil {
		return nil, fmt.Errorf("mounts of %s: %w", src.key, err)
	}
	upper, lowers, err := layerdiff.OverlayDirs(ms)
	if err != nil {
		return nil, err
	}
	if upper == "" || len(lowers) < len(src.layers) {
		return nil, fmt.Errorf("snapshot %s is not an overlay on its image: %w", src.key, errdefs.ErrFailedPrecondition)
	}
	out := []layerdiff.Layer{{Dir: upper, Shift: src.shift}}
	for _, l := range lowers {
		out = append(out, layerdiff.Layer{Dir: l})
	}
	return out, nil
}

// diffBase is the stack of layers a diff compares against, and what
// releases it.
func (m *Manager) diffBase(ctx context.Context, id string, src *source, newStack []layerdiff.Layer, since string) ([]layerdiff.Layer, func(), error) {
	forks := len(src.layers) - 1 // the fork layers right under the writable layer
	image := newStack[1+forks:]
	switch since {
	case DiffSinceCreate:
		return image, func() {}, nil
	case DiffSinceFork:
		if forks == 0 {
			return nil, nil, fmt.Errorf("since: sandbox %s was not made by a fork (use create, or an image committed from it): %w", id, errdefs.ErrFailedPrecondition)
		}
		return newStack[1:], func() {}, nil
	}
	return m.commitStack(ctx, id, src, image, since)
}

// commitStack is the layers of an image committed from sandbox id, as a
// read-only view of its snapshot, checked to sit on the sandbox's image.
func (m *Manager) commitStack(ctx context.Context, id string, src *source, image []layerdiff.Layer, ref string) ([]layerdiff.Layer, func(), error) {
	name, err := snapshot.NormalizeName(ref)
	if err != nil {
		return nil, nil, fieldErr("since", "%q is not create, fork or an image name: %v", ref, err)
	}
	// The label first: nothing is unpacked for an image that is not this
	// sandbox's commit.
	rec, err := m.cfg.Client.ImageService().Get(ctx, name)
	if errdefs.IsNotFound(err) {
		return nil, nil, fmt.Errorf("since: image %s not found: %w", ref, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("since: image %s: %w", ref, err)
	}
	if rec.Labels[snapshot.LabelCommittedFrom] != id {
		return nil, nil, fieldErr("since", "image %s is not a commit of sandbox %s", ref, id)
	}
	img, err := m.cfg.Images.Get(ctx, name)
	if err != nil {
		return nil, nil, fmt.Errorf("since: %w", err)
	}
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("since: image %s: %w", ref, err)
	}
	// Under a lease, so a view a killed boxd left is collected.
	lctx, done, err := m.cfg.Client.WithLease(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("since: lease: %w", err)
	}
	viewKey := "boxd-diff-since-" + newID()
	ms, err := src.sn.View(lctx, viewKey, identity.ChainID(diffIDs).String())
	if err != nil {
		_ = done(context.WithoutCancel(ctx))
		return nil, nil, fmt.Errorf("since: view of image %s: %w", ref, err)
	}
	cleanup := func() {
		_ = src.sn.Remove(context.WithoutCancel(ctx), viewKey)
		_ = done(context.WithoutCancel(ctx))
	}
	upper, lowers, err := layerdiff.OverlayDirs(ms)
	if err == nil && upper != "" {
		lowers = []string{upper} // a one-layer image: its directory, bound
	}
	var out []layerdiff.Layer
	for _, l := range lowers {
		out = append(out, layerdiff.Layer{Dir: l})
	}
	if err != nil || len(out) <= len(image) || !slices.Equal(out[len(out)-len(image):], image) {
		cleanup()
		if err == nil {
			err = fieldErr("since", "image %s does not sit on sandbox %s's image layers", ref, id)
		}
		return nil, nil, err
	}
	return out, cleanup, nil
}

// withoutMounts drops what the sandbox's mounts account for: paths under
// a mount (the volume's, bind's or tmpfs's files are not in the layer, and
// what the layer holds there the sandbox cannot see), and the directories
// (or file) runc added to the layer to mount on, with the directories
// leading to them. What the sandbox itself added beside them stays.
func withoutMounts(cs []layerdiff.Change, mounts []specs.Mount) []layerdiff.Change {
	dests := map[string]bool{}
	leading := map[string]bool{}
	for _, mt := range mounts {
		d := path.Clean("/" + mt.Destination)
		dests[d] = true
		for p := path.Dir(d); p != "/"; p = path.Dir(p) {
			leading[p] = true
		}
	}
	under := func(p string) bool {
		for q := path.Dir(p); q != "/"; q = path.Dir(q) {
			if dests[q] {
				return true
			}
		}
		return false
	}
	out := cs[:0]
	for _, c := range cs {
		isDir := c.Mode&unix.S_IFMT == unix.S_IFDIR
		if under(c.Path) || c.Kind == layerdiff.Added && (dests[c.Path] || leading[c.Path] && isDir) {
			continue
		}
		out = append(out, c)
	}
	return out
}
