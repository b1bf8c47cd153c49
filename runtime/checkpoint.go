//go:build linux

// Room: checkpoint. Checkpoint writes a running gVisor sandbox's
// processes, kernel state and root filesystem changes to disk (runsc
// checkpoint) and, unless asked to leave it running, ends its task so its
// memory is freed; Restore brings it back in a new task of the same
// container (runsc restore), with the same id, spec, limits and uid block.
// The image files live in checkpoint_store.go's host-root-only directory.

package runtime

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/gvchannel"
	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/oci"
)

// LabelCheckpointed marks a checkpointed sandbox: JSON CheckpointInfo. The
// sandbox is also marked stopped (LabelStopped), so that the reconciler
// never gives it a fresh init.
const LabelCheckpointed = "boxd.io/checkpointed"

// CheckpointInfo is what inspect shows of a sandbox's checkpoint.
type CheckpointInfo struct {
	At    time.Time `json:"at"`
	Bytes int64     `json:"bytes"` // size on disk
	// Pause is how long the sandbox's processes were stopped to be saved.
	Pause time.Duration `json:"pause"`
}

func checkpointInfo(labels map[string]string) *CheckpointInfo {
	v := labels[LabelCheckpointed]
	if v == "" {
		return nil
	}
	var ci CheckpointInfo
	if json.Unmarshal([]byte(v), &ci) != nil {
		return &CheckpointInfo{}
	}
	return &ci
}

// errCriu is why runc sandboxes are not checkpointed (docs/checkpoint.md).
var errCriu = fmt.Errorf("checkpoint is offered for gvisor sandboxes only: runc's checkpoint (CRIU) runs as host root over the sandbox's user namespace, seccomp filter and ID-mapped mounts, and is not used by boxd: %w", errdefs.ErrFailedPrecondition)

// ckTarget loads what a checkpoint or restore needs and checks that the
// sandbox is one boxd checkpoints.
func (m *Manager) ckTarget(ctx context.Context, ctr client.Container) (record, map[string]string, error) {
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return record{}, nil, fmt.Errorf("sandbox %s: %w", ctr.ID(), err)
	}
	var rec record
	if err := json.Unmarshal([]byte(labels[LabelSandbox]), &rec); err != nil {
		return rec, nil, fmt.Errorf("sandbox %s: corrupt %s label: %w", ctr.ID(), LabelSandbox, err)
	}
	if rec.Runtime != RuntimeGvisor {
		return rec, nil, errCriu
	}
	if m.cfg.Gvisor == nil {
		return rec, nil, fmt.Errorf("gvisor is not available to this boxd: %w", errdefs.ErrFailedPrecondition)
	}
	return rec, labels, nil
}

// runscRoot is the state root gVisor's shim runs runsc with for boxd's
// namespace.
func (m *Manager) runscRoot() string {
	return filepath.Join(m.cfg.Gvisor.Root, m.cfg.Namespace)
}

// Checkpoint saves a running gVisor sandbox to disk. Unless leaveRunning,
// its task ends afterwards (its memory is freed) and it is checkpointed
// until Restore. The sandbox needs a memory limit and a disk cap, and
// their sum must fit under --max-checkpoint-bytes with the checkpoints
// already on disk; otherwise nothing changes.
func (m *Manager) Checkpoint(ctx context.Context, idOrName string, leaveRunning bool) (*Sandbox, *CheckpointInfo, error) {
	return m.checkpoint(ctx, idOrName, leaveRunning, PauseByUser)
}

// checkpoint is Checkpoint for a reason (PauseByUser, PauseByIdle), which
// the checkpointed event carries.
func (m *Manager) checkpoint(ctx context.Context, idOrName string, leaveRunning bool, reason string) (*Sandbox, *CheckpointInfo, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, nil, err
	}
	id := ctr.ID()
	if !m.claimWait(ctx, id, 5*time.Second) {
		return nil, nil, fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	rec, labels, err := m.ckTarget(ctx, ctr)
	if err != nil {
		return nil, nil, err
	}
	if labels[LabelCheckpointed] != "" {
		return nil, nil, fmt.Errorf("sandbox %s is already checkpointed: %w", id, errdefs.ErrFailedPrecondition)
	}
	task, err := m.ckRunningTask(ctx, ctr, labels)
	if err != nil {
		return nil, nil, err
	}
	if rec.Memory <= 0 || rec.Disk <= 0 {
		return nil, nil, fmt.Errorf("checkpoint: sandbox %s needs a memory limit and a disk cap (create --memory, --disk), which bound its checkpoint: %w", id, errdefs.ErrFailedPrecondition)
	}
	giveBack, err := m.ckReserve(rec.Memory + rec.Disk + ckSlack)
	if err != nil {
		return nil, nil, err
	}
	defer giveBack()
	ci, err := m.ckSave(ctx, id, task, leaveRunning)
	if err != nil {
		return nil, nil, err
	}
	if !leaveRunning {
		if err := m.ckEndTask(ctx, ctr, task, ci); err != nil {
			return nil, nil, err
		}
		m.emit(events.Checkpointed, id, map[string]string{"reason": reason, "bytes": strconv.FormatInt(ci.Bytes, 10)})
	}
	m.log.Info("checkpointed", "sandbox", id, "bytes", ci.Bytes, "pause", ci.Pause, "leave_running", leaveRunning)
	sb, err := m.describeFresh(ctx, id)
	return sb, ci, err
}

// ckRunningTask is a sandbox's task if it runs and is not paused.
func (m *Manager) ckRunningTask(ctx context.Context, ctr client.Container, labels map[string]string) (client.Task, error) {
	id := ctr.ID()
	task, err := ctr.Task(ctx, nil)
	if stopped(labels) || errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("sandbox %s is stopped: %w", id, errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: task: %w", id, err)
	}
	if st, err := task.Status(ctx); err != nil || st.Status != client.Running {
		return nil, fmt.Errorf("sandbox %s is not running (%v %v): %w", id, st.Status, err, errdefs.ErrFailedPrecondition)
	}
	if m.isPaused(id) {
		return nil, fmt.Errorf("sandbox %s is paused: resume it first: %w", id, errdefs.ErrFailedPrecondition)
	}
	return task, nil
}

// ckSave has the init let go of its host sockets, runs runsc checkpoint
// and seals the image. On failure the image is gone and the sandbox runs
// as before, with its channel back.
func (m *Manager) ckSave(ctx context.Context, id string, task client.Task, leaveRunning bool) (_ *CheckpointInfo, retErr error) {
	if err := os.RemoveAll(m.ckDir(id)); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.MkdirAll(m.ckImageDir(id), 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if retErr != nil {
			os.RemoveAll(m.ckDir(id))
		}
	}()
	man := ckManifest{Sandbox: id, Secret: make([]byte, wire.CheckpointSecretSize)}
	if _, err := rand.Read(man.Secret); err != nil {
		return nil, err
	}
	oldPin, _ := gvchannel.ReadPin(m.gvPinPath(id))
	m.dropAgentPool(id)
	if err := m.agent(id).CheckpointPrepare(ctx, man.Secret); err != nil {
		m.ckReattach(ctx, id, task, oldPin, man.Secret)
		return nil, fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	m.dropAgentPool(id)
	start := time.Now()
	err := gvisor.Checkpoint(ctx, m.cfg.Gvisor.Info, m.runscRoot(), id, m.ckImageDir(id), leaveRunning)
	pause := time.Since(start)
	if err != nil || leaveRunning {
		if rerr := m.ckReattach(ctx, id, task, oldPin, man.Secret); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	man.Created, man.Pause = time.Now().UTC(), pause.String()
	if err := m.ckSeal(id, &man); err != nil {
		return nil, fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	return &CheckpointInfo{At: man.Created, Bytes: man.Bytes, Pause: pause}, nil
}

// ckEndTask deletes the task runsc checkpoint ended (freeing the
// sandbox's memory and its cgroup) and marks the sandbox checkpointed.
func (m *Manager) ckEndTask(ctx context.Context, ctr client.Container, task client.Task, ci *CheckpointInfo) error {
	id := ctr.ID()
	b, _ := json.Marshal(ci)
	// Marked first: a boxd killed halfway must not give it a fresh init.
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelStopped: ci.At.Format(time.RFC3339), LabelCheckpointed: string(b)}); err != nil {
		return fmt.Errorf("checkpoint sandbox %s: %w", id, err)
	}
	if err := deleteTask(ctx, ctr, task); err != nil {
		return fmt.Errorf("checkpoint sandbox %s: task: %w", id, err)
	}
	m.dropAgentPool(id)
	return nil
}

// ckReattach gets a gVisor init's channel back after checkpoint-prepare:
// it tells the init to bind a new agent socket (SIGUSR2 through the
// runtime) and pins the new socket once it proves it is the init's
// (ckProve). A socket that is still the old pinned one means the init
// never let go of it: the old pin stays.
func (m *Manager) ckReattach(ctx context.Context, id string, task client.Task, oldPin gvchannel.Pin, secret []byte) error {
	if err := task.Kill(ctx, syscall.SIGUSR2); err != nil {
		return fmt.Errorf("reattach: signal the init: %w", err)
	}
	uid := oldPin.UID
	if uid == 0 {
		var err error
		if uid, err = m.recordedRootUID(ctx, id); err != nil {
			return err
		}
	}
	return m.ckPinProven(ctx, id, task, uid, oldPin, secret, time.Now().Add(m.cfg.ReadyTimeout))
}

// ckPinProven waits for a socket of uid in the agent directory other than
// old, and pins it if it proves it holds secret. A socket that answers
// with a wrong proof is not the init's: refused.
func (m *Manager) ckPinProven(ctx context.Context, id string, task client.Task, uid uint32, old gvchannel.Pin, secret []byte, deadline time.Time) error {
	var lastErr error
	for delay := time.Millisecond; ; {
		pin, err := gvchannel.Find(m.gvAgentDir(id), uid)
		if errors.Is(err, gvchannel.ErrRefused) {
			return err
		}
		if err == nil && pin != old {
			err = m.ckProve(ctx, id, pin, secret)
			if err == nil {
				return gvchannel.WritePin(m.gvPinPath(id), pin)
			}
			if errors.Is(err, gvchannel.ErrRefused) {
				return err
			}
		}
		lastErr = err
		if exited := m.initExited(ctx, id, task); exited != nil {
			return exited
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the init did not bind a new agent socket within %s: %v", m.cfg.ReadyTimeout, lastErr)
		}
		time.Sleep(delay)
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// ckProve asks the socket pin names for its proof of secret.
func (m *Manager) ckProve(ctx context.Context, id string, pin gvchannel.Pin, secret []byte) error {
	dir := m.gvAgentDir(id)
	c := host.NewDialClient(func(ctx context.Context) (net.Conn, error) { return gvchannel.Dial(ctx, dir, pin) })
	nonce := make([]byte, wire.CheckpointSecretSize)
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	mac, err := c.CheckpointResume(pctx, nonce)
	if err != nil {
		var re *wire.RemoteError
		if errors.As(err, &re) {
			return fmt.Errorf("%w: the socket in the agent directory is not the init's (%v)", gvchannel.ErrRefused, err)
		}
		return err
	}
	if !hmac.Equal(mac, wire.CheckpointMAC(secret, nonce)) {
		return fmt.Errorf("%w: the socket in the agent directory does not hold the checkpoint's secret: not the init's", gvchannel.ErrRefused)
	}
	return nil
}

// specInit is what gvPrepare needs of a sandbox's stored spec.
func specInit(ctx context.Context, ctr client.Container) (cfgUID, cfgGID uint32, body func(*Manager) error, _ error) {
	spec, err := ctr.Spec(ctx)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("spec: %w", err)
	}
	cfg, err := oci.InitConfig(spec)
	if err != nil {
		return 0, 0, nil, err
	}
	uid, gid, err := rootHostIDs(spec)
	if err != nil {
		return 0, 0, nil, err
	}
	return uid, gid, func(m *Manager) error { return m.gvPrepare(ctr.ID(), cfg, uid, gid) }, nil
}
