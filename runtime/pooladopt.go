//go:build linux

// Room: pools. Handing a member out: whether it fits a create (fits)
// and its adoption as the client's sandbox.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/network"
)

// handedMarker is the file, in a member's state directory, written before
// its adoption changes anything in it: a boxd killed during an adoption
// finds it at restart and destroys the member instead of taking it back.
const handedMarker = "handed"

// fits reports whether a pool member can serve r: everything r asks for
// that a started sandbox cannot take any more (network, published ports,
// the default user, mounts, rlimits, hostname, cpu weight, disk cap, a
// fork's layer) must be what a member was started with.
//
// Under gVisor the limits too: runsc's Sentry reads them from the spec
// when it boots (runsc/boot/loader.go sizes the sandbox's memory to the
// memory limit, MemTotal inside; runsc/boot/vfs.go sets the sandbox's own
// cgroupfs memory and cpu quota defaults from them), so a host cgroup
// update would leave the sandbox seeing its member's limits, unlike a cold
// create of the same request.
func (m *Manager) fits(r resolved) bool {
	t := r.tun
	ok := !r.cold && r.network == network.ModeNone && len(r.publish) == 0 && !r.userSet && r.forkParent == "" &&
		!t.ReadOnly && len(t.Tmpfs) == 0 && t.Ulimits.zero() && t.Hostname == "" && t.CPUWeight == 0 &&
		r.limits.DiskBytes == m.cfg.DefaultLimits.DiskBytes
	if ok && r.runtime == RuntimeGvisor {
		d := m.cfg.DefaultLimits
		ok = r.limits.MemoryBytes == d.MemoryBytes && r.limits.CPUs == d.CPUs && r.limits.Pids == d.Pids && t.MemoryLow == 0
	}
	return ok
}

// fromPool hands out a pool member for r, or reports false (and the
// caller creates cold).
func (m *Manager) fromPool(ctx context.Context, r resolved, img client.Image, imgSpec ocispec.Image) (*Sandbox, bool) {
	if !m.fits(r) {
		return nil, false
	}
	for {
		id, info, ok := m.pool.take(keyOf(img.Name(), r.runtime))
		if !ok {
			return nil, false
		}
		m.pool.signal()
		sb, err := m.adopt(ctx, id, info, r, img, imgSpec)
		if err == nil {
			return sb, true
		}
		m.log.Warn("pool member unusable; destroying it", "sandbox", id, "err", err)
		if ctr, lerr := m.cfg.Client.LoadContainer(ctx, id); lerr == nil {
			_ = m.destroy(context.WithoutCancel(ctx), ctr)
		}
	}
}

// adopt turns a pool member (known: what it was started with, nil to read
// it from containerd) into the sandbox r asks for: its cgroup limits
// are updated in place, the init is given r's env and workdir, its stored
// spec and labels rewritten, so inspect, expiry and restarts see the
// sandbox as if it had been created cold.
func (m *Manager) adopt(ctx context.Context, id string, known *memberInfo, r resolved, img client.Image, imgSpec ocispec.Image) (*Sandbox, error) {
	if !m.claim(id) {
		return nil, fmt.Errorf("pool member %s is busy", id)
	}
	defer m.release(id)
	t0 := time.Now()
	var phases []any
	phase := func(name string) { phases = append(phases, name, time.Since(t0).Round(time.Microsecond)) }
	defer func() { m.log.Debug("adopt timing", append([]any{"sandbox", id}, phases...)...) }()
	// From here on the member is never put back, even by a restarted boxd.
	if err := os.WriteFile(filepath.Join(m.sandboxDir(id), handedMarker), nil, 0o600); err != nil {
		return nil, fmt.Errorf("mark handed out: %w", err)
	}
	if known == nil {
		// Taken back after a restart: one metadata read gives the label
		// and the spec it was started with, and the task its init's pid.
		var err error
		if known, err = m.readMember(ctx, id); err != nil {
			return nil, err
		}
	}
	phase("load")
	pid, hostID := known.pid, known.hostID
	if want := img.Target().Digest.String(); known.imageDigest != want {
		return nil, fmt.Errorf("started from %s@%s, which was replaced by %s", img.Name(), known.imageDigest, want)
	}
	spec, env, err := m.specFor(ctx, id, r, imgSpec, nil, hostID)
	if err != nil {
		return nil, err
	}
	if r.runtime == RuntimeGvisor {
		// As a cold create's spec has them: an init restarted from the
		// stored spec needs them (gvisor.Annotations).
		for k, v := range gvisor.Annotations(id) {
			spec.Annotations[k] = v
		}
	}
	phase("prepare")
	if err := m.setMemberLimits(ctx, id, spec); err != nil {
		return nil, err
	}
	phase("limits")
	if err := m.setMemberDefaults(ctx, id, r); err != nil {
		return nil, err
	}
	phase("init")
	now := time.Now().UTC().Truncate(time.Second)
	rec := record{
		Name: r.name, Image: img.Name(), ImageDigest: img.Target().Digest.String(), Memory: r.limits.MemoryBytes, CPUs: r.limits.CPUs, Pids: r.limits.Pids,
		Workdir: r.workdir, CreatedAt: now, ExpiresAt: now.Add(r.ttl), HostUID: hostID, IDMapSize: m.cfg.IDMapSize,
		Disk: r.limits.DiskBytes,
		User: r.user, Tunables: r.tun,
		// Still in the member's shim: its place there is given back when
		// the sandbox is destroyed, and counted after a restart.
		ShimGroup: known.shimGroup,
	}
	rec.Runtime = r.runtime
	rec = m.withRuntime(rec)
	// The member may have been made by an earlier boxd, on another runc.
	if known.runtime.Name != "" {
		rec.Runtime, rec.RuntimeVersion, rec.RuntimeAdvisories = known.runtime.Name, known.runtime.Version, known.runtime.Advisories
	}
	labels := m.labelsFor(rec, r)
	// One write of the two fields; containerd keeps the others as they
	// are (the update names its fields).
	info := containers.Container{ID: id, Labels: labels}
	if err := client.WithSpec(spec)(ctx, m.cfg.Client, &info); err != nil {
		return nil, fmt.Errorf("relabel: %w", err)
	}
	if _, err := m.cfg.Client.ContainerService().Update(ctx, info, "labels", "spec"); err != nil {
		return nil, fmt.Errorf("relabel: %w", err)
	}
	phase("relabel")
	m.execDefs.Store(id, Tunables{ExecTimeout: r.tun.ExecTimeout, OutputLimit: r.tun.OutputLimit})
	m.inv.showOwned(id, ownedOf(r))
	m.log.Info("created from the warm pool", "sandbox", id, "image", rec.Image, "memory", rec.Memory, "cpus", rec.CPUs, "pids", rec.Pids, "ttl", r.ttl)
	sb := m.toSandbox(id, labels, rec)
	sb.Env, sb.State, sb.InitPID = env, "running", pid
	return sb, nil
}

// setMemberLimits gives an adopted member's cgroup the limits of spec.
func (m *Manager) setMemberLimits(ctx context.Context, id string, spec *specs.Spec) error {
	err := setLimits(spec.Linux.CgroupsPath, spec.Linux.Resources)
	if err == nil {
		return nil
	}
	m.log.Debug("direct cgroup update failed; updating through the task", "sandbox", id, "err", err)
	task, err := m.loadTask(ctx, id)
	if err != nil {
		return err
	}
	if err := task.Update(ctx, client.WithResources(spec.Linux.Resources)); err != nil {
		return fmt.Errorf("update limits: %w", err)
	}
	return nil
}

// setMemberDefaults tells an adopted member's init the request's
// environment and working directory. The init's answer doubles as the
// liveness check; a member needs it only when the request changes its
// defaults. HOSTNAME goes last, as in a cold create's environment.
func (m *Manager) setMemberDefaults(ctx context.Context, id string, r resolved) error {
	d := wire.Defaults{}
	if len(r.env) > 0 {
		d.Env = append(append([]string{}, r.env...), "HOSTNAME="+id)
	}
	if r.workdir != r.imgWorkdir {
		d.Workdir = r.workdir
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl := m.agent(id)
	var err error
	if d.Env != nil || d.Workdir != "" {
		err = cl.SetDefaults(pctx, d)
	} else {
		err = cl.Ping(pctx)
	}
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	return nil
}

// readMember reads what a member was started with from containerd: its
// label, spec and task. The label's image digest is checked against the
// image at adoption: after a forced replace (boxctl image import --force)
// the idle members hold the old files and must not be handed out as the
// new image; a member without a recorded digest cannot be checked and
// counts as stale.
func (m *Manager) readMember(ctx context.Context, id string) (*memberInfo, error) {
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return nil, err
	}
	info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec); err != nil {
		return nil, fmt.Errorf("corrupt %s label: %w", LabelSandbox, err)
	}
	// The member keeps the uid block it was started with.
	var cur specs.Spec
	if info.Spec == nil {
		return nil, errors.New("spec: none stored")
	}
	if err := json.Unmarshal(info.Spec.GetValue(), &cur); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	hostID, _, err := rootHostIDs(&cur)
	if err != nil {
		return nil, err
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	return &memberInfo{pid: task.Pid(), hostID: hostID, shimGroup: rec.ShimGroup, imageDigest: rec.ImageDigest,
		runtime: RuntimeInfo{Name: rec.Runtime, Version: rec.RuntimeVersion, Advisories: rec.RuntimeAdvisories}}, nil
}

// loadTask is a sandbox's task.
func (m *Manager) loadTask(ctx context.Context, id string) (client.Task, error) {
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return nil, err
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	return task, nil
}
