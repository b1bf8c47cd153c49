//go:build linux

// Room: images. The layers of a sandbox's rootfs as commit and fork read
// them, the brief freeze they need, and fork layers: their disk charge,
// their chain, and their pruning.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/internal/layerdiff"
)

// LabelForkLayer marks a committed snapshot boxd made for a fork: the
// source's writable layer at that moment, unshifted, which the forks'
// writable layers sit on. Its value is the source sandbox's id. It is
// removed when the last snapshot on it goes (pruneForkLayers).
const LabelForkLayer = "boxd.io/fork-layer"

// LabelForkLayerBytes is on a fork layer: the host disk it is charged at
// against its forks' owners' max-disk-per-user (forkCharge).
const LabelForkLayerBytes = "boxd.io/fork-layer-bytes"

// LabelFrozen was on a sandbox while a commit or fork had it frozen (the
// time it was frozen) until boxd marked that with a file (frozenFile);
// a left-over label is still honoured.
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

// frozenFile, in a sandbox's state directory, is there while a commit or
// fork has the sandbox frozen (the time it was frozen). It outlives a boxd
// killed meanwhile, and the next reconcile pass thaws the sandbox
// (thawLeftover). A file, not a label: a label write is a containerd
// metadata commit with an fsync, and a commit or fork made two.
const frozenFile = "frozen-by-boxd"

// freeze stops a sandbox's processes (its cgroup's freezer, written
// directly as Pause does: about a millisecond, where containerd's task
// Pause runs runc twice) so its files hold still, and returns what resumes
// it. A sandbox already frozen (paused by a user or idle) or without a
// task is left as it is, and stays paused after the commit or fork.
func (m *Manager) freeze(ctx context.Context, ctr client.Container) (thaw func(), err error) {
	id := ctr.ID()
	path := m.cgPath(id)
	if populated, err := m.freezer.populated(path); err != nil {
		return nil, err
	} else if !populated {
		return func() {}, nil // no task: nothing runs to change the files
	}
	if f, err := m.freezer.frozen(path); err != nil {
		return nil, err
	} else if f {
		return func() {}, nil
	}
	mark := filepath.Join(m.sandboxDir(id), frozenFile)
	if err := os.WriteFile(mark, []byte(time.Now().UTC().Format(time.RFC3339Nano)), 0o600); err != nil {
		return nil, fmt.Errorf("mark frozen: %w", err)
	}
	if err := m.freezer.set(path, true); err != nil {
		_ = os.Remove(mark)
		return nil, err
	}
	return func() {
		if err := m.freezer.set(path, false); err != nil {
			m.log.Error("thaw after a commit or fork", "sandbox", id, "err", err)
			return // the mark stays: the reconciler tries again
		}
		if err := os.Remove(mark); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("clear frozen mark", "sandbox", id, "err", err)
		}
	}, nil
}

// frozenByBoxd reports whether a commit or fork left its mark on a
// sandbox: the file, or the label an older boxd set.
func (m *Manager) frozenByBoxd(id string, labels map[string]string) bool {
	if labels[LabelFrozen] != "" {
		return true
	}
	_, err := os.Lstat(filepath.Join(m.sandboxDir(id), frozenFile))
	return err == nil
}

// thawLeftover resumes a sandbox that boxd froze for a commit or fork
// and did not thaw (it was killed meanwhile), unless a commit or fork
// holds it now, or a user paused it after the thaw and before the mark
// was cleared.
func (m *Manager) thawLeftover(ctx context.Context, ctr client.Container) {
	id := ctr.ID()
	if !m.claim(id) {
		return
	}
	defer m.release(id)
	mark := filepath.Join(m.sandboxDir(id), frozenFile)
	if _, err := os.Lstat(mark); err == nil {
		if _, err := os.Lstat(filepath.Join(m.sandboxDir(id), pausedFile)); err != nil {
			if f, err := m.freezer.frozen(m.cgPath(id)); err == nil && f {
				if err := m.freezer.set(m.cgPath(id), false); err != nil {
					m.log.Error("thaw a sandbox left frozen by a commit or fork", "sandbox", id, "err", err)
					return
				}
				m.log.Warn("thawed a sandbox left frozen by an interrupted commit or fork", "sandbox", id)
			}
		}
		if err := os.Remove(mark); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.log.Warn("clear frozen mark", "sandbox", id, "err", err)
		}
	}
	labels, err := ctr.Labels(ctx)
	if err != nil || labels[LabelFrozen] == "" {
		return
	}
	// An older boxd froze through containerd (task Pause).
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

// forkCharge is the host disk a fork layer is charged at: its file data
// plus a block for each entry, so a layer of many small files or empty
// directories is not free.
func forkCharge(st layerdiff.CopyStats) int64 {
	return st.Bytes + int64(st.Entries)*4096
}

// forkChain is the fork layers a fork of src sits on, bottom first: the
// source's own and the new one.
func forkChain(ctx context.Context, src *source, top LayerCharge) ([]LayerCharge, error) {
	out, err := layerCharges(ctx, src.sn, src.layers)
	if err != nil {
		return nil, err
	}
	return append(out, top), nil
}

// layerCharges are the fork layers of ls (rootfsLayers) with their
// charges, from their labels.
func layerCharges(ctx context.Context, sn snapshots.Snapshotter, ls []layerSrc) ([]LayerCharge, error) {
	var out []LayerCharge
	for _, l := range ls {
		if l.active {
			continue
		}
		info, err := sn.Stat(ctx, l.key)
		if err != nil {
			return nil, fmt.Errorf("fork layer %s: %w", l.key, err)
		}
		// A layer made before charges were recorded counts as empty.
		n, _ := strconv.ParseInt(info.Labels[LabelForkLayerBytes], 10, 64)
		out = append(out, LayerCharge{Key: l.key, Bytes: n})
	}
	return out, nil
}

// withSnapshotOn gives a new container a new writable snapshot named key
// on parent (a fork layer) instead of on its image.
func withSnapshotOn(key, parent string, opts ...snapshots.Opt) client.NewContainerOpts {
	return func(ctx context.Context, c *client.Client, ctr *containers.Container) error {
		if _, err := c.SnapshotService(ctr.Snapshotter).Prepare(ctx, key, parent, opts...); err != nil {
			return fmt.Errorf("prepare snapshot on %s: %w", parent, err)
		}
		ctr.SnapshotKey = key
		return nil
	}
}
