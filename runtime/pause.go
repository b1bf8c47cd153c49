//go:build linux

// Room: lifecycle. Pause and Resume through the cgroup freezer, and the
// paused state the exec path checks.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/events"
)

// pausedFile, in the sandbox's state directory, records when and why it
// was paused (JSON of pauseInfo), for inspect. Whether it is paused is the
// kernel's freezer state, never this file. A file, not a label: a label
// write is a containerd metadata commit with an fsync, which would be most
// of a pause's cost.
const pausedFile = "paused.json"

type pauseInfo struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"` // user or idle
}

// Pause reasons, as events and inspect show them.
const (
	PauseByUser = "user"
	PauseByIdle = "idle"
)

type resumeKey struct{}

// WithResume marks a call that may resume a paused sandbox first (exec
// --resume); without it a call that needs the sandbox's init fails with
// failed_precondition while the sandbox is paused.
func WithResume(ctx context.Context) context.Context {
	return context.WithValue(ctx, resumeKey{}, true)
}

func resumeFrom(ctx context.Context) bool { v, _ := ctx.Value(resumeKey{}).(bool); return v }

func (m *Manager) setPaused(id string, p bool) {
	m.pausedMu.Lock()
	defer m.pausedMu.Unlock()
	if p {
		if m.paused == nil {
			m.paused = map[string]bool{}
		}
		m.paused[id] = true
	} else {
		delete(m.paused, id)
	}
}

func (m *Manager) isPaused(id string) bool {
	m.pausedMu.Lock()
	defer m.pausedMu.Unlock()
	return m.paused[id]
}

// checkPaused fails a call into a paused sandbox, or resumes it first when
// the call asked for that (exec --resume) or the sandbox resumes on its
// own (auto-resume).
func (m *Manager) checkPaused(ctx context.Context, id string) error {
	if !m.isPaused(id) {
		return nil
	}
	reason := "exec"
	if !resumeFrom(ctx) && m.autoResumes(ctx, id) {
		reason = "auto"
	}
	if resumeFrom(ctx) || reason == "auto" {
		err := m.Resume(ctx, id, reason)
		if err == nil || errdefs.IsFailedPrecondition(err) { // resumed meanwhile
			return nil
		}
		return err
	}
	return fmt.Errorf("sandbox %s is paused (unpause it, or pass resume: exec --resume): %w", id, errdefs.ErrFailedPrecondition)
}

// Pause freezes every process of a running sandbox: they keep their memory
// and files and use no CPU until Resume. reason is PauseByUser or
// PauseByIdle.
func (m *Manager) Pause(ctx context.Context, idOrName, reason string) error {
	id, err := m.resolveID(ctx, idOrName)
	if err != nil {
		return err
	}
	if !m.claimWait(ctx, id, 5*time.Second) {
		return fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	path := m.cgPath(id)
	if err := m.running(id, path); err != nil {
		return err
	}
	if f, err := m.freezer.frozen(path); err != nil {
		return fmt.Errorf("pause sandbox %s: %w", id, err)
	} else if f {
		m.setPaused(id, true)
		return fmt.Errorf("sandbox %s is already paused: %w", id, errdefs.ErrFailedPrecondition)
	}
	// Calls check the flag before they reach the init: set it first so
	// none starts against a freezing sandbox.
	m.setPaused(id, true)
	if err := m.freezer.set(path, true); err != nil {
		m.setPaused(id, false)
		return fmt.Errorf("pause sandbox %s: %w", id, err)
	}
	b, _ := json.Marshal(pauseInfo{At: time.Now().UTC(), Reason: reason})
	if err := os.WriteFile(filepath.Join(m.sandboxDir(id), pausedFile), b, 0o600); err != nil {
		m.log.Warn("pause: record", "sandbox", id, "err", err)
	}
	m.emit(events.Paused, id, map[string]string{"reason": reason})
	m.log.Info("paused", "sandbox", id, "reason", reason)
	return nil
}

// Resume thaws a paused sandbox. reason says who asked (user, exec).
func (m *Manager) Resume(ctx context.Context, idOrName, reason string) error {
	id, err := m.resolveID(ctx, idOrName)
	if err != nil {
		return err
	}
	if !m.claimWait(ctx, id, 5*time.Second) {
		return fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	path := m.cgPath(id)
	if err := m.running(id, path); err != nil {
		return err
	}
	if f, err := m.freezer.frozen(path); err != nil {
		return fmt.Errorf("resume sandbox %s: %w", id, err)
	} else if !f {
		m.setPaused(id, false)
		return fmt.Errorf("sandbox %s is not paused: %w", id, errdefs.ErrFailedPrecondition)
	}
	if err := m.freezer.set(path, false); err != nil {
		return fmt.Errorf("resume sandbox %s: %w", id, err)
	}
	m.setPaused(id, false)
	m.touch(id) // the idle clock starts again
	if err := os.Remove(filepath.Join(m.sandboxDir(id), pausedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("resume: record", "sandbox", id, "err", err)
	}
	m.emit(events.Resumed, id, map[string]string{"reason": reason})
	m.log.Info("resumed", "sandbox", id, "reason", reason)
	return nil
}

// resolveID turns an id or name into a client-visible sandbox's id; an
// id the inventory knows needs no containerd round trip.
func (m *Manager) resolveID(ctx context.Context, idOrName string) (string, error) {
	if idRe.MatchString(idOrName) && m.inv.isVisible(idOrName) {
		return idOrName, nil
	}
	ctr, err := m.find(namespaces.WithNamespace(ctx, m.cfg.Namespace), idOrName)
	if err != nil {
		return "", err
	}
	return ctr.ID(), nil
}

// running fails with failed_precondition unless the sandbox's cgroup holds
// processes: no cgroup means no task, an empty one a dead init (which the
// reconciler restarts). One file read, where asking containerd is several
// round trips.
func (m *Manager) running(id, path string) error {
	ok, err := m.freezer.populated(path)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("sandbox %s is not running: %w", id, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// thawForDelete thaws a frozen sandbox so the kill that deletes it is
// delivered (a frozen task does not die until thawed).
func (m *Manager) thawForDelete(ctx context.Context, id string) {
	path := m.cgPath(id)
	if f, err := m.freezer.frozen(path); err == nil && f {
		if err := m.freezer.set(path, false); err != nil {
			m.log.Warn("delete: thaw", "sandbox", id, "err", err)
		}
	}
	m.setPaused(id, false)
}

// refreshPaused re-reads the freezer state of every listed sandbox: at
// start (a paused sandbox stays paused across a boxd restart) and on every
// reconcile pass.
//
// A sandbox a commit or fork holds (claimed) is skipped: it freezes the
// sandbox for a moment, which is not a pause, and thaws it before it lets
// go.
func (m *Manager) refreshPaused(ctx context.Context, ids []string) {
	for _, id := range ids {
		if m.busy.Held(id) {
			continue
		}
		f, err := m.freezer.frozen(m.cgPath(id))
		if err != nil {
			m.log.Debug("freezer state", "sandbox", id, "err", err)
			continue
		}
		m.setPaused(id, f)
	}
}

// pausedAt reads when and why a sandbox was paused.
func (m *Manager) pausedAt(id string) pauseInfo {
	var p pauseInfo
	if b, err := os.ReadFile(filepath.Join(m.sandboxDir(id), pausedFile)); err == nil {
		_ = json.Unmarshal(b, &p)
	}
	return p
}

// cgPath is a sandbox's cgroup (its spec's cgroupsPath).
func (m *Manager) cgPath(id string) string { return parentCgroup(m.cfg.Namespace) + "/" + id }
