//go:build linux

// Room: describe. Sandbox, what boxd reports about one; Get, List and
// the listing filters; the record and task state turned into it.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/oci"
)

// Sandbox is what boxd reports about a sandbox.
type Sandbox struct {
	ID        string
	Name      string
	Image     string
	State     string // running, stopped, unknown
	Limits    Limits
	Env       []string
	Workdir   string
	Labels    map[string]string
	CreatedAt time.Time
	ExpiresAt time.Time
	InitPID   uint32
	UIDMap    string
	OwnerUID  uint32     // the host uid that created it
	Ports     []PortSpec // published ports, as recorded
	Usage     *Usage     // set by Get while the sandbox runs
	Restarts  RestartInfo
	Network   *NetworkInfo
	// PausedAt and PauseReason are set while the sandbox is paused.
	PausedAt    time.Time
	PauseReason string
	Idle        *IdleInfo // nil: no idle timeout
	User        string    // default user of commands; empty: root
	Tunables    Tunables
	StoppedAt   time.Time // set while stopped by Stop
	// DiskUsedBytes is what the writable layer of a capped sandbox uses
	// (Get only); the cap is Limits.DiskBytes.
	DiskUsedBytes int64
	Runtime       RuntimeInfo
	// Volumes are the named volumes the sandbox mounts, as its record
	// holds them (a volume removed with --force stays listed: its mount
	// is still there, failing with EIO).
	Volumes []SandboxVolume
	// Binds are the host directories the sandbox mounts (binds.go).
	Binds []SandboxBind
	// Checkpoint is set while the sandbox is checkpointed (state
	// "checkpointed").
	Checkpoint *CheckpointInfo
	// AutoResume: calls restore or resume the sandbox first.
	AutoResume bool

	hostUID uint32 // first host id of its uid block (the pool keeps it)
	// shimGroup is the shim it shares (the pool keeps it too).
	shimGroup string
}

// RuntimeInfo is the OCI runtime a sandbox was made on.
type RuntimeInfo struct {
	Name, Version string
	Advisories    []string // known container escapes of that version (CVE ids)
}

// Get inspects one sandbox by id or name.
func (m *Manager) Get(ctx context.Context, idOrName string) (*Sandbox, error) {
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	sb, err := m.describe(ctx, ctr, true)
	if err != nil {
		return nil, err
	}
	return sb, nil
}

func (m *Manager) describe(ctx context.Context, ctr client.Container, withEnv bool) (*Sandbox, error) {
	return m.describeKnown(ctx, ctr, withEnv, nil)
}

// describeKnown is describe with the task's state already known (nil: ask
// containerd for it).
func (m *Manager) describeKnown(ctx context.Context, ctr client.Container, withEnv bool, known *task.Process) (*Sandbox, error) {
	info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return nil, fmt.Errorf("inspect sandbox %s: %w", ctr.ID(), err)
	}
	var rec record
	if err := json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec); err != nil {
		return nil, fmt.Errorf("inspect sandbox %s: corrupt %s label: %w", ctr.ID(), LabelSandbox, err)
	}
	sb := m.toSandbox(ctr.ID(), info.Labels, rec)
	if withEnv && info.Spec != nil {
		var s specs.Spec
		if err := json.Unmarshal(info.Spec.GetValue(), &s); err == nil {
			sb.Env = commandEnv(&s)
		}
	}
	sb.State = "unknown"
	var t client.Task // err is nil here: Info succeeded
	if known == nil {
		t, err = ctr.Task(ctx, nil)
	}
	switch {
	case errdefs.IsNotFound(err):
		sb.State = "stopped"
	case known != nil:
		sb.InitPID = known.Pid
		// As the client's Task.Status spells it.
		sb.State = strings.ToLower(known.Status.String())
	case err == nil:
		sb.InitPID = t.Pid()
		if st, err := t.Status(ctx); err == nil {
			sb.State = string(st.Status)
		}
	}
	if sb.Checkpoint = checkpointInfo(info.Labels); sb.Checkpoint != nil && sb.State == "stopped" {
		sb.State = "checkpointed"
	}
	if err == nil && sb.State != "stopped" {
		// containerd does not see boxd's freezer writes: the kernel's
		// state is the truth.
		if sb.State == string(client.Running) {
			if f, err := m.freezer.frozen(m.cgPath(sb.ID)); err == nil && f {
				sb.State = string(client.Paused)
				p := m.pausedAt(sb.ID)
				sb.PausedAt, sb.PauseReason = p.At, p.Reason
			}
		}
		if withEnv && (sb.State == string(client.Running) || sb.State == string(client.Paused)) {
			if t == nil {
				t, err = ctr.Task(ctx, nil)
			}
			var u *Usage
			if err == nil {
				u, err = usage(ctx, t, m.cgPath(sb.ID))
			}
			if err == nil {
				sb.Usage = u
			} else {
				m.log.Debug("usage", "sandbox", sb.ID, "err", err)
			}
			m.diskUsage(ctx, ctr, sb)
		}
	}
	return sb, nil
}

// commandEnv is the environment commands get, as stored in s, without the
// HOSTNAME boxd adds.
func commandEnv(s *specs.Spec) []string {
	var env []string
	if cfg, err := oci.InitConfig(s); err == nil {
		for _, kv := range cfg.Env {
			if !strings.HasPrefix(kv, "HOSTNAME=") {
				env = append(env, kv)
			}
		}
		return env
	}
	// A spec made by an older boxd kept it in the init's environment,
	// next to the init's own BOXD_ settings.
	if s.Process != nil {
		for _, kv := range s.Process.Env {
			if !strings.HasPrefix(kv, "BOXD_") && !strings.HasPrefix(kv, "HOSTNAME=") {
				env = append(env, kv)
			}
		}
	}
	return env
}

func (m *Manager) toSandbox(id string, labels map[string]string, rec record) *Sandbox {
	sb := &Sandbox{
		ID: id, Name: rec.Name, Image: rec.Image,
		Limits:  Limits{MemoryBytes: rec.Memory, CPUs: rec.CPUs, Pids: rec.Pids, DiskBytes: rec.Disk},
		Workdir: rec.Workdir, CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt,
		Labels:   map[string]string{},
		UIDMap:   fmt.Sprintf("0:%d:%d", rec.HostUID, rec.IDMapSize),
		OwnerUID: ownerOf(labels),
		Ports:    parsePorts(labels[LabelPorts]),
		Restarts: restartInfo(labels),
		Runtime:  RuntimeInfo{Name: rec.Runtime, Version: rec.RuntimeVersion, Advisories: rec.RuntimeAdvisories},
		Idle:     m.idleInfo(id, labels),
		User:     rec.User, Tunables: rec.Tunables,
		hostUID: rec.HostUID, shimGroup: rec.ShimGroup,
		Volumes: sandboxVolumes(rec.Volumes),
		Binds:   sandboxBinds(rec.Binds),
	}
	if t, err := time.Parse(time.RFC3339, labels[LabelStopped]); err == nil {
		sb.StoppedAt = t
	}
	sb.AutoResume = labels[LabelAutoResume] == "true"
	st, err := parseNetState(labels)
	if err != nil {
		m.log.Warn("inspect", "sandbox", id, "err", err)
	}
	gw := ""
	if m.cfg.Network != nil && st != nil {
		gw = m.cfg.Network.Gateway().String()
	}
	sb.Network = st.info(gw)
	for k, v := range labels {
		if len(k) > len(UserLabelPrefix) && k[:len(UserLabelPrefix)] == UserLabelPrefix {
			sb.Labels[k[len(UserLabelPrefix):]] = v
		}
	}
	return sb
}

// ListFilter narrows a listing. A caller that is not an admin lists only
// its own sandboxes whatever the filter says (the API refuses All and
// another's Owner for it); an admin lists its own unless All or Owner.
type ListFilter struct {
	Labels map[string]string
	All    bool
	Owner  *uint32 // only this uid's
}

// listOwnerFilter is the containerd filter for the client-visible
// sandboxes f's owner fields and ctx's caller allow a listing to show:
// the caller's own, unless an admin asks for all or another owner's.
func listOwnerFilter(ctx context.Context, f ListFilter) (string, error) {
	filter := fmt.Sprintf(`labels."%s"==true`, LabelManaged)
	if c, ok := CallerFrom(ctx); ok || f.Owner != nil {
		uid := c.UID
		switch {
		case f.Owner != nil && (c.Admin || c.Unchecked || *f.Owner == c.UID || !ok):
			uid = *f.Owner
		case f.Owner != nil:
			return "", fmt.Errorf("owner: only root and --admin-group members may list another user's sandboxes: %w", errdefs.ErrPermissionDenied)
		case f.All && !(c.Admin || c.Unchecked):
			return "", fmt.Errorf("all: only root and --admin-group members may list every user's sandboxes: %w", errdefs.ErrPermissionDenied)
		}
		if f.Owner != nil || !f.All {
			filter += fmt.Sprintf(`,labels."%s"==%s`, LabelOwner, strconv.Quote(strconv.FormatUint(uint64(uid), 10)))
		}
	}
	return filter, nil
}

// List returns the sandboxes the caller may see (see ListFilter), or those
// of them carrying all the given labels, sorted by creation time.
func (m *Manager) List(ctx context.Context, labels map[string]string) ([]*Sandbox, error) {
	return m.ListFiltered(ctx, ListFilter{Labels: labels})
}

// ListFiltered is List with an owner filter.
func (m *Manager) ListFiltered(ctx context.Context, f ListFilter) ([]*Sandbox, error) {
	labels := f.Labels
	filter, err := listOwnerFilter(ctx, f)
	if err != nil {
		return nil, err
	}
	for k, v := range labels {
		if !labelKeyRe.MatchString(k) {
			return nil, fieldErr("labels", "key %q must be letters, digits, _ . / -", k)
		}
		filter += fmt.Sprintf(`,labels."%s%s"==%s`, UserLabelPrefix, k, strconv.Quote(v))
	}
	ctrs, err := m.cfg.Client.Containers(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	// Every task's state in one call, after the containers were listed (a
	// container whose task is not in it is asked on its own): one call
	// each for the task and its status was two round trips per sandbox.
	states := map[string]*task.Process{}
	if len(ctrs) > 1 {
		if resp, err := m.cfg.Client.TaskService().List(ctx, &tasks.ListTasksRequest{}); err == nil {
			for _, t := range resp.Tasks {
				states[t.ID] = t
			}
		}
	}
	out := make([]*Sandbox, 0, len(ctrs))
	for _, ctr := range ctrs {
		sb, err := m.describeKnown(ctx, ctr, false, states[ctr.ID()])
		if err != nil {
			if errdefs.IsNotFound(err) {
				continue // deleted while we listed
			}
			return nil, err
		}
		out = append(out, sb)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].ID < out[j].ID
		}
		return out[i].CreatedAt.Before(out[j].CreatedAt)
	})
	return out, nil
}
