//go:build linux

// Room: lifecycle. Stop, Start and Update of an existing sandbox.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/oci"
)

// LabelStopped marks a sandbox stopped by StopSandbox (RFC 3339 time):
// the reconciler never restarts it, only StartSandbox does.
const LabelStopped = "boxd.io/stopped"

// DefaultStopGrace is how long stop and delete wait after SIGTERM before
// they SIGKILL what is left (docker's and most wrappers' 10 s).
const DefaultStopGrace = 10 * time.Second

// MaxStopGrace bounds a grace period: a caller waits through it.
const MaxStopGrace = 10 * time.Minute

// ParseGrace reads a grace period; empty is DefaultStopGrace.
func ParseGrace(field, s string) (time.Duration, error) {
	if s == "" {
		return DefaultStopGrace, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fieldErr(field, "%q is not a duration (examples: 0s, 10s, 1m)", s)
	}
	if d < 0 || d > MaxStopGrace {
		return 0, fieldErr(field, "%q must be between 0s and %s", s, MaxStopGrace)
	}
	return d, nil
}

// UpdateRequest changes a sandbox; zero values keep what it has.
type UpdateRequest struct {
	TTL     string // new lifetime from now
	Extend  string // added to the current expiry
	Memory  string
	CPUs    float64
	Pids    int64
	Env     []string
	Workdir string
}

// Update changes a sandbox's limits (on its live cgroup), TTL, and the
// environment and working directory of later commands, and records them in
// its labels and stored spec so that a restarted boxd or init keeps them.
// Everything is validated before anything changes.
func (m *Manager) Update(ctx context.Context, idOrName string, req UpdateRequest) (*Sandbox, error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	if req.TTL != "" && req.Extend != "" {
		return nil, fieldErr("extend", "give either ttl or extend, not both")
	}
	if err := ValidateEnv("env", req.Env); err != nil {
		return nil, err
	}
	if err := ValidateWorkdir("workdir", req.Workdir); err != nil {
		return nil, err
	}
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	id := ctr.ID()
	if !m.claimWait(ctx, id, 5*time.Second) {
		return nil, fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	info, err := ctr.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("update sandbox %s: %w", id, err)
	}
	var rec record
	if err := json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec); err != nil {
		return nil, fmt.Errorf("update sandbox %s: corrupt %s label: %w", id, LabelSandbox, err)
	}
	old := Limits{MemoryBytes: rec.Memory, CPUs: rec.CPUs, Pids: rec.Pids}
	lim, err := m.parseLimits(req.Memory, req.CPUs, req.Pids, old)
	if err != nil {
		return nil, err
	}
	if err := m.withinTotals(lim); err != nil {
		return nil, err
	}
	if rec.MemoryLow > lim.MemoryBytes {
		return nil, fieldErr("limits.memory", "%d bytes is below the sandbox's memory_low of %d bytes", lim.MemoryBytes, rec.MemoryLow)
	}
	expires, err := newExpiry(req, rec.ExpiresAt)
	if err != nil {
		return nil, err
	}
	spec, err := updatedSpec(id, info.Spec.GetValue(), req, lim)
	if err != nil {
		return nil, err
	}
	running, err := m.updateLive(ctx, ctr, req, lim != old, spec)
	if err != nil {
		return nil, err
	}
	rec.Memory, rec.CPUs, rec.Pids, rec.ExpiresAt = lim.MemoryBytes, lim.CPUs, lim.Pids, expires
	if req.Workdir != "" {
		rec.Workdir = req.Workdir
	}
	recJSON, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	err = ctr.Update(ctx, client.UpdateContainerOpts(client.WithSpec(spec)), func(_ context.Context, _ *client.Client, c *containers.Container) error {
		c.Labels[LabelSandbox] = string(recJSON)
		c.Labels[LabelExpiresAt] = expires.Format(time.RFC3339)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update sandbox %s: record: %w", id, err)
	}
	m.log.Info("updated", "sandbox", id, "memory", rec.Memory, "cpus", rec.CPUs, "pids", rec.Pids, "expires_at", expires, "env", len(req.Env), "workdir", req.Workdir, "running", running)
	return m.describeFresh(ctx, id)
}

// newExpiry is the expiry req sets (TTL from now, or Extend added to
// current), or current if it sets none.
func newExpiry(req UpdateRequest, current time.Time) (time.Time, error) {
	now := time.Now().UTC().Truncate(time.Second)
	switch {
	case req.TTL != "":
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d <= 0 {
			return time.Time{}, fieldErr("ttl", "%q is not a positive duration (examples: 30m, 2h)", req.TTL)
		}
		if d > MaxTTL {
			return time.Time{}, fieldErr("ttl", "%q is above the maximum of %s", req.TTL, MaxTTL)
		}
		return now.Add(d), nil
	case req.Extend != "":
		d, err := time.ParseDuration(req.Extend)
		if err != nil || d <= 0 {
			return time.Time{}, fieldErr("extend", "%q is not a positive duration (examples: 30m, 2h)", req.Extend)
		}
		expires := current.Add(d)
		if expires.Sub(now) > MaxTTL {
			return time.Time{}, fieldErr("extend", "%q would put the expiry %s from now, above the maximum of %s", req.Extend, expires.Sub(now).Round(time.Second), MaxTTL)
		}
		return expires, nil
	}
	return current, nil
}

// updatedSpec is sandbox id's stored spec (JSON) with req's environment
// and working directory in the init's settings and lim in its resources.
func updatedSpec(id string, stored []byte, req UpdateRequest, lim Limits) (*specs.Spec, error) {
	var spec specs.Spec
	if err := json.Unmarshal(stored, &spec); err != nil {
		return nil, fmt.Errorf("update sandbox %s: stored spec: %w", id, err)
	}
	initCfg, err := oci.InitConfig(&spec)
	if err != nil {
		return nil, fmt.Errorf("update sandbox %s: %w", id, err)
	}
	if len(req.Env) > 0 {
		initCfg.Env = mergeEnvList(initCfg.Env, req.Env)
	}
	if req.Workdir != "" {
		initCfg.Workdir = req.Workdir
	}
	b, err := initCfg.Encode()
	if err != nil {
		return nil, fieldErr("env", "%v", err)
	}
	spec.Annotations[oci.InitAnnotation] = string(b)
	res := spec.Linux.Resources
	res.Memory.Limit, res.Memory.Swap = &lim.MemoryBytes, &lim.MemoryBytes
	quota := int64(lim.CPUs*oci.CPUPeriod + 0.5)
	res.CPU.Quota = &quota
	pids := lim.Pids
	res.Pids = &specs.LinuxPids{Limit: &pids}
	return &spec, nil
}

// updateLive applies an update to a running sandbox: the limits (if
// changed) to its cgroup, the defaults to its init. It reports whether
// the sandbox runs; a stopped one takes the update at its next start.
func (m *Manager) updateLive(ctx context.Context, ctr client.Container, req UpdateRequest, limitsChanged bool, spec *specs.Spec) (bool, error) {
	id := ctr.ID()
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return false, nil
	}
	if st, err := task.Status(ctx); err != nil || st.Status != client.Running {
		return false, nil
	}
	if limitsChanged {
		if err := m.applyLimits(ctx, task, spec); err != nil {
			return true, err
		}
	}
	if len(req.Env) > 0 || req.Workdir != "" {
		if err := m.agent(id).SetDefaults(ctx, wire.Defaults{Env: req.Env, Workdir: req.Workdir}); err != nil {
			return true, fmt.Errorf("update sandbox %s: tell the init: %w", id, err)
		}
	}
	return true, nil
}

// applyLimits writes spec's limits to a running sandbox's cgroup, through
// the task if the direct write fails. Lowering memory below what the
// sandbox uses fails on cgroup v1 (the kernel cannot reclaim enough).
func (m *Manager) applyLimits(ctx context.Context, task client.Task, spec *specs.Spec) error {
	err := setLimits(spec.Linux.CgroupsPath, spec.Linux.Resources)
	if err == nil {
		return nil
	}
	m.log.Debug("direct cgroup update failed; updating through the task", "sandbox", task.ID(), "err", err)
	if terr := task.Update(ctx, client.WithResources(spec.Linux.Resources)); terr != nil {
		if errors.Is(err, syscall.EBUSY) || strings.Contains(terr.Error(), "busy") {
			return fmt.Errorf("limits.memory: the sandbox uses more than the new limit (%v): %w", terr, errdefs.ErrFailedPrecondition)
		}
		return fmt.Errorf("update limits of sandbox %s: %w", task.ID(), terr)
	}
	return nil
}

// mergeEnvList puts extra over base: one entry per name, later winning.
func mergeEnvList(base, extra []string) []string {
	out := slices.Clone(base)
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(e string) bool { return strings.HasPrefix(e, k+"=") })
		if i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return out
}

// Stop ends every process of a sandbox (SIGTERM, then SIGKILL after grace)
// and its init, keeping its files; it stays stopped until Start.
func (m *Manager) Stop(ctx context.Context, idOrName string, grace time.Duration) (*Sandbox, error) {
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
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return nil, err
	}
	task, terr := ctr.Task(ctx, nil)
	if labels[LabelStopped] != "" || errdefs.IsNotFound(terr) {
		return nil, fmt.Errorf("sandbox %s is already stopped: %w", id, errdefs.ErrFailedPrecondition)
	}
	// Marked first: a boxd killed halfway must not bring it back.
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelStopped: time.Now().UTC().Format(time.RFC3339)}); err != nil {
		return nil, fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	if terr == nil {
		m.terminate(ctx, id, task, grace)
		if err := deleteTask(ctx, ctr, task); err != nil {
			return nil, fmt.Errorf("stop sandbox %s: task: %w", id, err)
		}
	}
	m.log.Info("stopped", "sandbox", id, "grace", grace)
	return m.describeFresh(ctx, id)
}

// terminate gives a sandbox's processes SIGTERM and up to grace to exit;
// the caller then kills what is left with the init. Failures only shorten
// the grace: the kill follows anyway.
func (m *Manager) terminate(ctx context.Context, id string, task client.Task, grace time.Duration) {
	if grace <= 0 || !m.othersRunning(ctx, task) {
		return
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := m.agent(id).Terminate(tctx)
	cancel()
	if err != nil {
		m.log.Warn("graceful stop: SIGTERM not delivered; killing at once", "sandbox", id, "err", err)
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if !m.othersRunning(ctx, task) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// othersRunning reports whether processes besides the init are left.
func (m *Manager) othersRunning(ctx context.Context, task client.Task) bool {
	ps, err := task.Pids(ctx)
	if err != nil {
		return false
	}
	return len(ps) > 1
}

// Start gives a stopped sandbox a new init on its writable layer.
func (m *Manager) Start(ctx context.Context, idOrName string) (*Sandbox, error) {
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
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return nil, err
	}
	if labels[LabelStopped] == "" {
		return nil, fmt.Errorf("sandbox %s is not stopped: %w", id, errdefs.ErrFailedPrecondition)
	}
	if labels[LabelCheckpointed] != "" {
		return nil, fmt.Errorf("sandbox %s is checkpointed: restore it (a fresh init would lose its processes): %w", id, errdefs.ErrFailedPrecondition)
	}
	if _, err := m.removeDeadTask(ctx, ctr); err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	// The same check as a dead-init restart: runc must not be sent
	// through a writable layer that redirects it.
	problem, err := m.checkRootfs(ctx, ctr)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	if problem != "" {
		return nil, fmt.Errorf("start sandbox %s: its writable layer would redirect runc (%s); files are kept until delete: %w", id, problem, errdefs.ErrFailedPrecondition)
	}
	if err := m.startNewInit(ctx, ctr, m.cfg.ReadyTimeout+restartSlack); err != nil {
		return nil, m.explainFailure(fmt.Errorf("start sandbox %s: %w", id, err))
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelStopped: ""}); err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", id, err)
	}
	m.log.Info("started", "sandbox", id)
	return m.describeFresh(ctx, id)
}

// stopped reports whether labels mark a sandbox stopped by Stop.
func stopped(labels map[string]string) bool { return labels[LabelStopped] != "" }

// describeFresh describes a sandbox from freshly loaded metadata (a loaded
// container caches its labels and spec).
func (m *Manager) describeFresh(ctx context.Context, id string) (*Sandbox, error) {
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.describe(ctx, ctr, true)
}
