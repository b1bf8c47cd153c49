//go:build linux

// Room: checkpoint. Restore: a checkpointed gVisor sandbox back in a new
// task of its own container, from the image checkpoint.go wrote, once
// boxd has checked every file of it.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/boxd-dev/boxd/agent/gvchannel"
	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/internal/gvisor"
)

// Restore brings a checkpointed sandbox back: the same container (id,
// spec with its capabilities, seccomp profile, uid block and limits,
// network), a new task whose start is runsc's restore from the image, and
// the init's channel pinned once the init proves it is the one that was
// saved. The image is verified first (every file's HMAC under boxd's key)
// and removed after; a restore that fails leaves the sandbox
// checkpointed.
func (m *Manager) Restore(ctx context.Context, idOrName string) (*Sandbox, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	id := ctr.ID()
	if !m.claimWait(ctx, id, 5*time.Second) {
		return nil, fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	if err := m.restoreLocked(ctx, ctr, PauseByUser); err != nil {
		return nil, err
	}
	return m.describeFresh(ctx, id)
}

// restoreLocked is Restore with the sandbox held; reason (user, exec,
// auto) goes into the restored event.
func (m *Manager) restoreLocked(ctx context.Context, ctr client.Container, reason string) error {
	id := ctr.ID()
	_, labels, err := m.ckTarget(ctx, ctr)
	if err != nil {
		return err
	}
	if labels[LabelCheckpointed] == "" {
		return fmt.Errorf("sandbox %s %w: %w", id, errNotCheckpointed, errdefs.ErrFailedPrecondition)
	}
	start := time.Now()
	if err := m.restoreTask(ctx, ctr); err != nil {
		return m.explainFailure(fmt.Errorf("restore sandbox %s: %w", id, err))
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelStopped: "", LabelCheckpointed: ""}); err != nil {
		return fmt.Errorf("restore sandbox %s: %w", id, err)
	}
	// The restored sandbox holds what it needs in memory: the image
	// would only count against --max-checkpoint-bytes.
	if err := os.RemoveAll(m.ckDir(id)); err != nil {
		m.log.Warn("restore: remove the checkpoint", "sandbox", id, "err", err)
	}
	m.touch(id)
	m.emit(events.Restored, id, map[string]string{"reason": reason})
	m.log.Info("restored", "sandbox", id, "reason", reason, "took", time.Since(start))
	return nil
}

// restoreTask verifies the image, makes the task that restores it and
// waits for the init to prove itself. On failure the task is gone again.
func (m *Manager) restoreTask(ctx context.Context, ctr client.Container) (retErr error) {
	id := ctr.ID()
	man, err := m.ckVerify(id)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, m.cfg.ReadyTimeout+restartSlack)
	defer cancel()
	if _, err := m.removeDeadTask(sctx, ctr); err != nil {
		return err
	}
	if err := m.renewNetwork(sctx, ctr); err != nil {
		return err
	}
	m.dropAgentPool(id)
	uid, _, prepare, err := specInit(sctx, ctr)
	if err != nil {
		return err
	}
	if err := prepare(m); err != nil {
		return err
	}
	// The shim's runsc (gvisor.WriteWrapper) restores from the image
	// instead of starting while this mark is there.
	mark := filepath.Join(m.ckDir(id), gvisor.RestoringName)
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer os.Remove(mark)
	task, err := m.newTask(sctx, ctr)
	if err != nil {
		return fmt.Errorf("task: %w", err)
	}
	defer func() {
		if retErr != nil {
			m.dropFailedRestore(ctx, id, task)
		}
	}()
	if err := m.blkio.account(m.cgPath(id)); err != nil {
		m.log.Debug("block I/O figures may stay 0", "sandbox", id, "err", err)
	}
	if err := task.Start(sctx); err != nil {
		return fmt.Errorf("runsc restore: %w", err)
	}
	if err := m.ckReattach(sctx, id, task, gvchannel.Pin{UID: uid}, man.Secret); err != nil {
		return err
	}
	return m.waitReady(sctx, id, task, time.Now().Add(m.cfg.ReadyTimeout))
}

// dropFailedRestore removes the task of a restore that failed. A runsc
// restore that failed leaves gVisor's shim holding the task as created
// with a pid, which containerd's client refuses to delete and whose exit
// a kill-and-wait would wait for forever; the task service deletes it
// (the shim kills what is left and runs runsc delete).
func (m *Manager) dropFailedRestore(ctx context.Context, id string, task client.Task) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if st, err := task.Status(dctx); err == nil && st.Status == client.Running {
		if _, err := task.Delete(dctx, client.WithProcessKill); err == nil || errdefs.IsNotFound(err) {
			return
		}
	}
	_, err := m.cfg.Client.TaskService().Delete(dctx, &tasks.DeleteTaskRequest{ContainerID: id})
	if err != nil && !errdefs.IsNotFound(errgrpc.ToNative(err)) {
		m.log.Error("cleanup: delete the task of a failed restore", "sandbox", id, "err", err)
	}
}

var errNotCheckpointed = errors.New("is not checkpointed")

// restoreForCall restores a checkpointed sandbox before a call into its
// init that asked to resume it (exec --resume) or whose sandbox resumes
// on its own (auto-resume); anything else is left to the call. Only a
// sandbox with a checkpoint on disk costs more than a stat. A call that
// finds another restoring the sandbox waits for it: a restore takes
// about a second, longer on a loaded host.
func (m *Manager) restoreForCall(ctx context.Context, id string) error {
	if _, err := os.Stat(filepath.Join(m.ckDir(id), "manifest.mac")); err != nil {
		return nil
	}
	reason := "exec"
	if !resumeFrom(ctx) {
		if !m.autoResumes(ctx, id) {
			return nil
		}
		reason = "auto"
	}
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	if !m.claimWait(ctx, id, m.cfg.ReadyTimeout+restartSlack) {
		return fmt.Errorf("sandbox %s is being created, restored or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	if err := m.restoreLocked(ctx, ctr, reason); err != nil && !errors.Is(err, errNotCheckpointed) {
		return err
	}
	return nil
}
