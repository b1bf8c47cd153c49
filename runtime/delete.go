//go:build linux

// Room: delete. Delete, graceful and background deletes, and destroy:
// the task, container, layers, uid block, network and state directory of
// a sandbox, in that order, and nothing of it left after.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/events"
)

// Delete destroys a sandbox and its data: task, container, snapshot and
// state directory.
func (m *Manager) Delete(ctx context.Context, idOrName string) error {
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return err
	}
	return m.destroy(ctx, ctr)
}

func (m *Manager) destroy(ctx context.Context, ctr client.Container) error {
	id := ctr.ID()
	// The reconciler may hold the sandbox for a moment; a create or another
	// delete holds it longer.
	if !m.claimWait(ctx, id, 5*time.Second) {
		return fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	m.inv.hide(id)
	m.ports.Release(id, nil)
	// A warm-pool member was never a client's sandbox: its end is no event.
	member, owner := false, uint32(0)
	if info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata); err == nil {
		member, owner = info.Labels[LabelPool] != "", ownerOf(info.Labels)
	}
	task, err := ctr.Task(ctx, nil)
	if err == nil {
		m.thawForDelete(ctx, id)
		// WithProcessKill waits for the exit before it kills, so none is
		// missed, then deletes.
		if err := deleteTask(ctx, ctr, task); err != nil {
			return fmt.Errorf("delete sandbox %s: task: %w", id, err)
		}
		m.dropCmdGroups(id)
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete sandbox %s: load task: %w", id, err)
	}
	m.sweepSandboxCgroup(id)
	// A fork's writable layer sits on a fork layer, which goes with the
	// last sandbox on it.
	var sn snapshots.Snapshotter
	var parent string
	if info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata); err == nil && info.SnapshotKey != "" {
		sn = m.cfg.Client.SnapshotService(info.Snapshotter)
		if si, err := sn.Stat(ctx, info.SnapshotKey); err == nil {
			parent = si.Parent
		}
	}
	rec, hasRec := recorded(ctx, ctr)
	// A capped writable layer is unmounted first: its snapshot directory
	// cannot be removed under a mount.
	if l, ok, err := m.containerDisk(ctx, ctr); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete sandbox %s: disk: %w", id, err)
	} else if ok {
		if err := l.Unmount(); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
	}
	if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete sandbox %s: container: %w", id, err)
	}
	// Fork layers hold unshifted ids, like image layers: nothing of the
	// sandbox's uid block is left in them.
	if sn != nil {
		m.pruneForkLayers(ctx, sn, parent)
	}
	// The container and its writable layer are gone, so no file of the
	// sandbox's uid block is left: the block may serve another sandbox.
	// Its shim has no container of it left either: the place in the
	// group is free.
	if hasRec {
		if rec.HostUID != 0 {
			m.ids.give(rec.HostUID)
		}
		m.shims.give(rec.ShimGroup)
	}
	// The namespace outlives the task (it is pinned); release it, the
	// address and the rules now.
	if err := m.teardownNetwork(ctx, id); err != nil {
		return fmt.Errorf("delete sandbox %s: network: %w", id, err)
	}
	m.inv.forget(id)
	m.releaseVolumes(id)
	m.unmountBinds(id)
	m.execDefs.Delete(id)
	m.oomFiles.forget(id)
	m.dropAgentPool(id)
	m.dropInterp(id)
	m.pool.signal() // a slot under max-sandboxes may be free for a member
	m.forgetActivity(id)
	if err := os.RemoveAll(m.sandboxDir(id)); err != nil {
		return fmt.Errorf("delete sandbox %s: state dir: %w", id, err)
	}
	m.log.Info("deleted", "sandbox", id)
	if !member {
		m.cfg.Events.Emit(events.Deleted, id, owner, nil) // forgotten by the inventory: the owner from its labels
	}
	return nil
}

// recorded is the sandbox's record label, read before it is deleted: its
// uid block and shim group go back after.
func recorded(ctx context.Context, ctr client.Container) (record, bool) {
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return record{}, false
	}
	var rec record
	if json.Unmarshal([]byte(labels[LabelSandbox]), &rec) != nil {
		return record{}, false
	}
	return rec, true
}

// deleteTask kills and deletes a sandbox's task. Under load the shim can
// close its connection mid-call ("ttrpc: closed") after doing the work, so
// a failure is retried against a freshly loaded task, and a task that is
// gone by then counts as deleted.
func deleteTask(ctx context.Context, ctr client.Container, task client.Task) error {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
			if task, err = ctr.Task(ctx, nil); errdefs.IsNotFound(err) {
				return nil
			} else if err != nil {
				continue
			}
		}
		if _, err = task.Delete(ctx, client.WithProcessKill); err == nil || errdefs.IsNotFound(err) {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
	}
	return err
}

// DeleteGraceful destroys a sandbox after giving its processes SIGTERM and
// up to grace to exit (0: SIGKILL at once, as Delete).
func (m *Manager) DeleteGraceful(ctx context.Context, idOrName string, grace time.Duration) error {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return err
	}
	if grace > 0 {
		if task, err := ctr.Task(ctx, nil); err == nil {
			if st, err := task.Status(ctx); err == nil && st.Status == client.Running {
				m.terminate(ctx, ctr.ID(), task, grace)
			}
		}
	}
	return m.destroy(ctx, ctr)
}

// DeleteBackground deletes a sandbox without waiting for its teardown:
// once it returns, the sandbox is no client's (list, lookups by id or
// name, names and quotas no longer see it) and a label marks it for
// deletion, so a boxd killed before the teardown ends finishes it at
// start (Load). Its processes get grace to end, then everything goes as
// in DeleteGraceful, in the background.
func (m *Manager) DeleteBackground(ctx context.Context, idOrName string, grace time.Duration) error {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return err
	}
	id := ctr.ID()
	if !m.claimWait(ctx, id, 5*time.Second) {
		return fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	err = ctr.Update(ctx, func(_ context.Context, _ *client.Client, c *containers.Container) error {
		delete(c.Labels, LabelManaged)
		c.Labels[LabelDeleting] = time.Now().UTC().Format(time.RFC3339)
		return nil
	})
	if err != nil {
		m.release(id)
		return fmt.Errorf("delete sandbox %s: mark deleting: %w", id, err)
	}
	m.inv.hide(id)
	m.release(id)
	go m.finishDeleteOnce(context.WithoutCancel(ctx), id, grace)
	return nil
}

// finishDeleteOnce runs finishDelete unless one runs for id already, and
// notes a teardown that did not finish, for retryDeletes.
func (m *Manager) finishDeleteOnce(ctx context.Context, id string, grace time.Duration) {
	if _, running := m.bgDeletes.LoadOrStore(id, struct{}{}); running {
		return
	}
	defer m.bgDeletes.Delete(id)
	if m.finishDelete(ctx, id, grace) {
		m.bgDeleteFailed.Delete(id)
	} else {
		m.bgDeleteFailed.Store(id, time.Now())
	}
}

// deleteRetryEvery spaces the reconcile pass's retries of one background
// delete that did not finish (containerd restarting, a full disk).
const deleteRetryEvery = 5 * time.Second

// retryDeletes finishes the background deletes that failed (each at most
// every deleteRetryEvery) and those a previous boxd left, rather than
// leaving their containers, snapshots and mounts until boxd restarts.
func (m *Manager) retryDeletes(ctx context.Context) {
	recs, err := m.cfg.Client.ContainerService().List(ctx, fmt.Sprintf(`labels."%s"`, LabelDeleting))
	if err != nil {
		return
	}
	for _, r := range recs {
		if r.Labels[LabelManaged] == "true" {
			continue
		}
		if at, ok := m.bgDeleteFailed.Load(r.ID); ok && time.Since(at.(time.Time)) < deleteRetryEvery {
			continue
		}
		if _, running := m.bgDeletes.Load(r.ID); running {
			continue
		}
		if at, err := time.Parse(time.RFC3339, r.Labels[LabelDeleting]); err == nil && time.Since(at) < deleteRetryEvery {
			continue // just marked: its own teardown is starting
		}
		go m.finishDeleteOnce(context.WithoutCancel(ctx), r.ID, 0)
	}
}

// finishDelete tears down a sandbox marked deleting and reports whether
// it is gone.
func (m *Manager) finishDelete(ctx context.Context, id string, grace time.Duration) bool {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(ctx, m.cfg.Namespace), 2*time.Minute+grace)
	defer cancel()
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err == nil && grace > 0 {
		if task, terr := ctr.Task(ctx, nil); terr == nil {
			if st, serr := task.Status(ctx); serr == nil && st.Status == client.Running {
				m.terminate(ctx, id, task, grace)
			}
		}
	}
	if err == nil {
		err = m.destroy(ctx, ctr)
	}
	if err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("background delete failed; the reconcile pass retries it", "sandbox", id, "err", err)
		return false
	}
	return true
}

// sweepSandboxCgroup kills whatever is still in the sandbox's cgroup and
// removes it, in every hierarchy. After a containerd restart a shim can
// lose a task it was starting (an init restart's runc init, waiting to be
// started), so no task delete reaches it: it would run on, and hold the
// cgroup, after its sandbox is gone.
func (m *Manager) sweepSandboxCgroup(id string) {
	rel := m.cgPath(id)
	if root := m.cmdcg.unifiedRoot(); root != "" {
		if dir := filepath.Join(root, rel); pathExists(dir) {
			_ = killCgroup(dir)
			m.dropCmdGroups(id)
			_ = os.Remove(dir)
		}
	}
	hiers, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hiers {
		dir := filepath.Join(h, rel)
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		// The killed leave the cgroup once reaped: a moment.
		for i := 0; i < 20 && os.Remove(dir) != nil && pathExists(dir); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func pathExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
