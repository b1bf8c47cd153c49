//go:build linux

package runtime

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/layerdiff"
)

// LabelForkLayer marks a committed snapshot boxd made for a fork: the
// source's writable layer at that moment, unshifted, which the forks'
// writable layers sit on. Its value is the source sandbox's id. It is
// removed when the last snapshot on it goes (pruneForkLayers).
const LabelForkLayer = "boxd.io/fork-layer"

// LabelFrozen is on a sandbox while a commit or fork has it frozen (the
// time it was frozen).
const LabelFrozen = "boxd.io/frozen"

// layerSrc is one layer of a sandbox's rootfs above its image: the
// sandbox's own writable layer (active, in shifted ownership) or a fork
// layer under it (committed, unshifted).
type layerSrc struct {
	key, parent string
	active      bool
}

// rootfsLayers lists the layers of the snapshot key above its image,
// bottom first: the fork layers it sits on, then key itself.
func rootfsLayers(ctx context.Context, sn snapshots.Snapshotter, key string) ([]layerSrc, error) {
	info, err := sn.Stat(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	if info.Parent == "" {
		return nil, fmt.Errorf("snapshot %s has no image under it: %w", key, errdefs.ErrFailedPrecondition)
	}
	out := []layerSrc{{key: key, parent: info.Parent, active: true}}
	for p := info.Parent; ; {
		pi, err := sn.Stat(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", p, err)
		}
		if pi.Labels[LabelForkLayer] == "" {
			return out, nil
		}
		if pi.Parent == "" {
			return nil, fmt.Errorf("fork layer %s has no image under it: %w", p, errdefs.ErrFailedPrecondition)
		}
		out = append([]layerSrc{{key: p, parent: pi.Parent}}, out...)
		p = pi.Parent
	}
}

// specShift is the user-namespace mapping a sandbox's spec gives its root.
func specShift(s *specs.Spec) (layerdiff.Shift, error) {
	uid, gid, err := rootHostIDs(s)
	if err != nil {
		return layerdiff.Shift{}, err
	}
	return layerdiff.Shift{HostUID: uid, HostGID: gid, Size: s.Linux.UIDMappings[0].Size}, nil
}

// writeLayerDiff writes layer l as an OCI layer tar, ownership unshifted
// when it is the sandbox's own (shifted) writable layer. The layers under
// it are mounted read-only, without ID mapping, as the base of the diff.
// The caller keeps the layer from changing (the sandbox is frozen).
func writeLayerDiff(ctx context.Context, sn snapshots.Snapshotter, l layerSrc, shift layerdiff.Shift, w io.Writer) error {
	upper, cleanup, err := layerDir(ctx, sn, l)
	if err != nil {
		return err
	}
	defer cleanup()
	if !l.active {
		shift = layerdiff.Shift{}
	}
	viewKey := "boxd-diff-view-" + newID()
	base, err := sn.View(ctx, viewKey, l.parent)
	if err != nil {
		return fmt.Errorf("view of %s: %w", l.parent, err)
	}
	defer func() { _ = sn.Remove(context.WithoutCancel(ctx), viewKey) }()
	return mount.WithTempMount(ctx, readOnly(base), func(root string) error {
		return layerdiff.WriteDiff(ctx, w, root, upper, shift)
	})
}

// layerDir is the directory holding layer l's own files: an active
// snapshot's upperdir, or a committed one's directory (the first lowerdir
// of a view on it).
func layerDir(ctx context.Context, sn snapshots.Snapshotter, l layerSrc) (string, func(), error) {
	if l.active {
		ms, err := sn.Mounts(ctx, l.key)
		if err != nil {
			return "", nil, fmt.Errorf("mounts of %s: %w", l.key, err)
		}
		upper, _, err := layerdiff.OverlayDirs(ms)
		if err != nil {
			return "", nil, err
		}
		if upper == "" {
			return "", nil, fmt.Errorf("snapshot %s has no overlay upperdir: %w", l.key, errdefs.ErrFailedPrecondition)
		}
		return upper, func() {}, nil
	}
	viewKey := "boxd-layer-view-" + newID()
	ms, err := sn.View(ctx, viewKey, l.key)
	if err != nil {
		return "", nil, fmt.Errorf("view of %s: %w", l.key, err)
	}
	cleanup := func() { _ = sn.Remove(context.WithoutCancel(ctx), viewKey) }
	upper, lowers, err := layerdiff.OverlayDirs(ms)
	switch {
	case err != nil:
	case len(lowers) > 0:
		return lowers[0], cleanup, nil
	case upper != "":
		return upper, cleanup, nil
	default:
		err = fmt.Errorf("view of %s shows no layer directory", l.key)
	}
	cleanup()
	return "", nil, err
}

// readOnly adds nodev, nosuid and noexec to mounts that are read-only
// already (views); boxd only reads through them.
func readOnly(ms []mount.Mount) []mount.Mount {
	out := make([]mount.Mount, len(ms))
	for i, m := range ms {
		m.Options = append(append([]string(nil), m.Options...), "nodev", "nosuid", "noexec")
		out[i] = m
	}
	return out
}

// freeze pauses a sandbox's task so its files hold still, and returns
// what resumes it. A sandbox already paused (by someone else) or without a
// task is left as it is.
func (m *Manager) freeze(ctx context.Context, ctr client.Container) (thaw func(), err error) {
	task, err := ctr.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load task: %w", err)
	}
	st, err := task.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("task status: %w", err)
	}
	if st.Status != client.Running {
		return func() {}, nil
	}
	// A sandbox paused through boxd (PauseSandbox, idle) is frozen in the
	// cgroup, which containerd does not see: its files hold still already,
	// and it must stay paused after the commit or fork.
	if f, err := m.freezer.frozen(m.cgPath(ctr.ID())); err == nil && f {
		return func() {}, nil
	}
	// The label outlives a boxd killed while the sandbox is frozen; the
	// next reconcile pass thaws it (thawLeftover).
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelFrozen: time.Now().UTC().Format(time.RFC3339)}); err != nil {
		return nil, fmt.Errorf("mark frozen: %w", err)
	}
	unmark := func(ctx context.Context) {
		if _, err := ctr.SetLabels(ctx, map[string]string{LabelFrozen: ""}); err != nil {
			m.log.Warn("clear frozen mark", "sandbox", ctr.ID(), "err", err)
		}
	}
	if err := task.Pause(ctx); err != nil {
		unmark(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pause: %w", err)
	}
	return func() {
		cctx := context.WithoutCancel(ctx)
		if err := task.Resume(cctx); err != nil {
			m.log.Error("resume after freeze", "sandbox", ctr.ID(), "err", err)
			return // the mark stays: the reconciler tries again
		}
		unmark(cctx)
	}, nil
}

// thawLeftover resumes a sandbox that boxd froze for a commit or fork
// and did not thaw (it was killed meanwhile), unless a commit or fork
// holds it now.
func (m *Manager) thawLeftover(ctx context.Context, ctr client.Container) {
	id := ctr.ID()
	if !m.claim(id) {
		return
	}
	defer m.release(id)
	task, err := ctr.Task(ctx, nil)
	if err == nil {
		if st, serr := task.Status(ctx); serr == nil && st.Status == client.Paused {
			if err := task.Resume(ctx); err != nil {
				m.log.Error("thaw a sandbox left frozen by a commit or fork", "sandbox", id, "err", err)
				return
			}
			m.log.Warn("thawed a sandbox left frozen by an interrupted commit or fork", "sandbox", id)
		}
	} else if !errdefs.IsNotFound(err) {
		return
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelFrozen: ""}); err != nil {
		m.log.Warn("clear frozen mark", "sandbox", id, "err", err)
	}
}

// pruneForkLayers removes the fork layer parent and the fork layers under
// it once no snapshot sits on them any more (the snapshotter refuses to
// remove a snapshot with children, which ends the walk).
func (m *Manager) pruneForkLayers(ctx context.Context, sn snapshots.Snapshotter, parent string) {
	for parent != "" {
		info, err := sn.Stat(ctx, parent)
		if err != nil || info.Labels[LabelForkLayer] == "" {
			return
		}
		if err := sn.Remove(ctx, parent); err != nil {
			if !errdefs.IsFailedPrecondition(err) && !errdefs.IsNotFound(err) {
				m.log.Warn("remove fork layer", "snapshot", parent, "err", err)
			}
			return
		}
		m.log.Debug("fork layer removed", "snapshot", parent)
		parent = info.Parent
	}
}
