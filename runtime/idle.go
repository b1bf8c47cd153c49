//go:build linux

// Room: reconcile. Idle policy: activity tracking and the idle expiry
// the reconciler applies (pause, delete or checkpoint), and auto-resume.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/events"
)

// LabelIdle holds a sandbox's idle policy (JSON of idlePolicy), so it
// survives a boxd restart.
const LabelIdle = "boxd.io/idle"

// Idle actions.
const (
	IdlePause  = "pause"
	IdleDelete = "delete"
	// IdleCheckpoint checkpoints the sandbox to disk (gVisor), freeing
	// its memory; it implies auto-resume.
	IdleCheckpoint = "checkpoint"
)

// LabelAutoResume marks a sandbox whose calls restore it from its
// checkpoint, or resume it from a pause, before they run (create
// --auto-resume, implied by --on-idle checkpoint).
const LabelAutoResume = "boxd.io/auto-resume"

// idlePolicy is what happens to a sandbox nobody uses: after Timeout with
// no exec, file call or attached stream, Action (pause, delete or
// checkpoint).
type idlePolicy struct {
	Timeout time.Duration `json:"timeout"`
	Action  string        `json:"action"`
}

// IdleInfo is what inspect shows of the idle policy.
type IdleInfo struct {
	Timeout      time.Duration
	Action       string
	LastActivity time.Time // zero while a call is in progress
}

// ParseOnIdle checks an idle action ("" is the default, pause).
func ParseOnIdle(field, s string) (string, error) {
	switch s {
	case "", IdlePause:
		return IdlePause, nil
	case IdleDelete:
		return IdleDelete, nil
	case IdleCheckpoint:
		return IdleCheckpoint, nil
	}
	return "", fieldErr(field, "%q: want pause, delete or checkpoint", s)
}

// resolveIdle reads a create's idle settings over the daemon's defaults.
func (m *Manager) resolveIdle(req CreateRequest, r *resolved) error {
	r.idle = idlePolicy{Timeout: m.cfg.IdleTimeout, Action: m.cfg.OnIdle}
	if r.idle.Action == "" {
		r.idle.Action = IdlePause
	}
	if req.IdleTimeout != "" {
		d, err := time.ParseDuration(req.IdleTimeout)
		if err != nil {
			return fieldErr("idle_timeout", "%q is not a duration (examples: 10m, 1h; 0: never)", req.IdleTimeout)
		}
		if d < 0 || (d > 0 && d < time.Second) {
			return fieldErr("idle_timeout", "%q must be 0 (never) or at least 1s", req.IdleTimeout)
		}
		if d > MaxTTL {
			return fieldErr("idle_timeout", "%q is above the maximum of %s", req.IdleTimeout, MaxTTL)
		}
		r.idle.Timeout = d
	}
	if req.OnIdle != "" {
		a, err := ParseOnIdle("on_idle", req.OnIdle)
		if err != nil {
			return err
		}
		r.idle.Action = a
	}
	r.autoResume = req.AutoResume || (r.idle.Timeout > 0 && r.idle.Action == IdleCheckpoint)
	return nil
}

// checkIdleCheckpoint refuses an asked-for idle checkpoint that the
// sandbox could not take: it needs gVisor, a memory limit and a disk cap
// (they bound the checkpoint). The daemon's --on-idle checkpoint applies
// to what can be checkpointed; other sandboxes are paused instead
// (checkIdle).
func checkIdleCheckpoint(req CreateRequest, r resolved) error {
	if req.OnIdle != IdleCheckpoint || r.idle.Timeout <= 0 {
		return nil
	}
	if r.runtime != RuntimeGvisor {
		return fmt.Errorf("on_idle: checkpoint needs runtime gvisor (runc sandboxes are not checkpointed; see docs/checkpoint.md): %w", errdefs.ErrFailedPrecondition)
	}
	if r.limits.MemoryBytes <= 0 || r.limits.DiskBytes <= 0 {
		return fieldErr("on_idle", "checkpoint needs a memory limit and a disk cap (limits.memory, limits.disk), which bound the checkpoint")
	}
	return nil
}

func idleLabel(p idlePolicy) string {
	if p.Timeout <= 0 {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func parseIdle(labels map[string]string) (idlePolicy, bool) {
	var p idlePolicy
	if json.Unmarshal([]byte(labels[LabelIdle]), &p) != nil || p.Timeout <= 0 {
		return p, false
	}
	return p, true
}

// activity is when each sandbox was last used and how many calls into its
// init are open now (an exec running, a stream attached).
type activity struct {
	mu sync.Mutex
	m  map[string]*use
}

type use struct {
	open int
	last time.Time
}

func (a *activity) get(id string) *use {
	if a.m == nil {
		a.m = map[string]*use{}
	}
	u := a.m[id]
	if u == nil {
		u = &use{last: time.Now()}
		a.m[id] = u
	}
	return u
}

// touch marks a sandbox used now.
func (m *Manager) touch(id string) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	m.act.get(id).last = time.Now()
}

// track counts one open connection to a sandbox's init, from dial to close.
func (m *Manager) track(id string) func() {
	m.act.mu.Lock()
	u := m.act.get(id)
	u.open++
	u.last = time.Now()
	m.act.mu.Unlock()
	return func() {
		m.act.mu.Lock()
		defer m.act.mu.Unlock()
		u.open--
		u.last = time.Now()
	}
}

func (m *Manager) forgetActivity(id string) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	delete(m.act.m, id)
}

// idleFor is how long a sandbox has had no call open (0 while one is), and
// its last use. A sandbox boxd has not seen used since it started counts
// from the first time it asks.
func (m *Manager) idleFor(id string, now time.Time) (time.Duration, time.Time) {
	m.act.mu.Lock()
	defer m.act.mu.Unlock()
	u := m.act.get(id)
	if u.open > 0 {
		return 0, time.Time{}
	}
	return now.Sub(u.last), u.last
}

// checkIdle applies a sandbox's idle policy; it reports whether the
// sandbox was deleted.
func (m *Manager) checkIdle(ctx context.Context, ctr client.Container, labels map[string]string, now time.Time) (bool, error) {
	p, ok := parseIdle(labels)
	if !ok {
		return false, nil
	}
	id := ctr.ID()
	if stopped(labels) { // stopped or checkpointed: nothing runs
		return false, nil
	}
	if p.Action != IdleDelete && m.isPaused(id) {
		return false, nil
	}
	idle, _ := m.idleFor(id, now)
	if idle < p.Timeout {
		return false, nil
	}
	// Background processes (exec --detach) are commands that run too: ask
	// the init, on a connection that does not count as use.
	if !m.isPaused(id) {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		infos, err := m.agent(id).ListProcesses(lctx)
		cancel()
		if err != nil {
			return false, nil // a dead or busy init: the next pass decides
		}
		for _, in := range infos {
			if in.State == wire.StateRunning {
				m.touch(id)
				return false, nil
			}
		}
	}
	m.log.Info("idle timeout", "sandbox", id, "idle", idle.Round(time.Second), "action", p.Action)
	m.emit(events.Idle, id, map[string]string{"action": p.Action, "idle_timeout": p.Timeout.String()})
	switch p.Action {
	case IdleDelete:
		if err := m.destroy(ctx, ctr); err != nil {
			return false, fmt.Errorf("idle delete: %w", err)
		}
		return true, nil
	case IdleCheckpoint:
		err := m.idleCheckpoint(ctx, id)
		if err == nil {
			return false, nil
		}
		m.log.Warn("idle checkpoint failed: pausing instead", "sandbox", id, "err", err)
		fallthrough
	default:
		if err := m.Pause(ctx, id, PauseByIdle); err != nil {
			return false, fmt.Errorf("idle pause: %w", err)
		}
		return false, nil
	}
}

// idleCheckpoint checkpoints an idle sandbox and frees its memory. A
// sandbox that cannot be checkpointed (runc, over --max-checkpoint-bytes,
// a runsc failure) is left as it was, for the caller to pause.
func (m *Manager) idleCheckpoint(ctx context.Context, id string) error {
	if !m.isGvisor(id) {
		return fmt.Errorf("sandbox %s is not a gvisor sandbox", id)
	}
	_, _, err := m.checkpoint(ctx, id, false, PauseByIdle)
	return err
}

// autoResumes reports whether a sandbox's calls restore or resume it
// first: create --auto-resume, or --on-idle checkpoint.
func (m *Manager) autoResumes(ctx context.Context, id string) bool {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return false
	}
	labels, err := ctr.Labels(ctx)
	return err == nil && labels[LabelAutoResume] == "true"
}

// idleInfo is the idle policy and the last activity, for inspect.
func (m *Manager) idleInfo(id string, labels map[string]string) *IdleInfo {
	p, ok := parseIdle(labels)
	if !ok {
		return nil
	}
	_, last := m.idleFor(id, time.Now())
	return &IdleInfo{Timeout: p.Timeout, Action: p.Action, LastActivity: last}
}
