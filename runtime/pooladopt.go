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
	"strings"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/network/ports"
)

// handedMarker is the file, in a member's state directory, written before
// its adoption changes anything in it: a boxd killed during an adoption
// finds it at restart and destroys the member instead of taking it back.
const handedMarker = "handed"

// fits reports whether a pool member can serve r: everything r asks for
// that a started sandbox cannot take any more (mounts, rlimits, cpu
// weight, disk cap, a fork's layer) must be what a member was started
// with. Published ports (boxd's listeners, dialling through the init), a
// hostname (set in the member's UTS namespace) and a default user (which
// the init resolves in the sandbox's /etc/passwd, as it does at start:
// the member has run nothing, so the file is the image's) are applied at
// hand-out; an egress network is attached at hand-out to a member of an
// egress pool, started in a namespace of boxd's own as a cold egress
// create's (runc only: runsc's netstack takes the namespace's interfaces
// when it boots). Under gVisor the hostname lives in the Sentry, out of
// the host's reach, so it makes the create cold there.
//
// Under gVisor the limits too: runsc's Sentry reads them from the spec
// when it boots (runsc/boot/loader.go sizes the sandbox's memory to the
// memory limit, MemTotal inside; runsc/boot/vfs.go sets the sandbox's own
// cgroupfs memory and cpu quota defaults from them), so a host cgroup
// update would leave the sandbox seeing its member's limits, unlike a cold
// create of the same request.
func (m *Manager) fits(r resolved) bool {
	t := r.tun
	ok := !r.cold && (r.network == network.ModeNone || r.runtime == RuntimeRunc) && r.forkParent == "" &&
		!t.ReadOnly && len(t.Tmpfs) == 0 && t.Ulimits.zero() && t.CPUWeight == 0 &&
		r.limits.DiskBytes == m.cfg.DefaultLimits.DiskBytes
	if ok && r.runtime == RuntimeGvisor {
		d := m.cfg.DefaultLimits
		ok = r.limits.MemoryBytes == d.MemoryBytes && r.limits.CPUs == d.CPUs && r.limits.Pids == d.Pids && t.MemoryLow == 0 &&
			t.Hostname == ""
	}
	return ok
}

// fromPool hands out a pool member for r, or reports false (and the
// caller creates cold). The published ports are listened on first, as a
// cold create does before it makes anything: a port in use leaves the
// pool alone, and the cold create reports it. A request the member
// refuses as a cold create's init would (an unknown user) fails with
// that error: the next member, or a cold create, would refuse it too.
func (m *Manager) fromPool(ctx context.Context, r resolved, img client.Image, imgSpec ocispec.Image) (*Sandbox, bool, error) {
	key := keyOf(img.Name(), r.runtime).withNetwork(r.network)
	// Members mount no volumes, no host directories and no secrets' CA.
	if len(r.volumes) > 0 || len(r.binds) > 0 || len(r.secrets) > 0 || !m.fits(r) {
		m.pool.count(key, outcomeUnfit)
		return nil, false, nil
	}
	if m.pool.readyOf(key) == 0 {
		m.pool.count(key, outcomeEmpty)
		return nil, false, nil
	}
	lns, err := bindPorts(ctx, "publish", r.publish)
	if err != nil {
		return nil, false, nil
	}
	for {
		id, info, ok := m.pool.take(key)
		if !ok {
			closeListeners(lns)
			m.pool.count(key, outcomeEmpty)
			return nil, false, nil
		}
		m.pool.signal()
		sb, err := m.adopt(ctx, id, info, r, img, imgSpec, lns)
		if err == nil {
			m.pool.count(key, outcomeHanded)
			return sb, true, nil
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			m.log.Warn("pool member unusable; destroying it", "sandbox", id, "err", err)
		}
		if ctr, lerr := m.cfg.Client.LoadContainer(ctx, id); lerr == nil {
			_ = m.destroy(context.WithoutCancel(ctx), ctr)
		}
		if fe != nil {
			closeListeners(lns)
			return nil, false, err
		}
	}
}

// closeListeners closes published ports' listeners no sandbox serves.
func closeListeners(lns []*ports.Listener) {
	for _, l := range lns {
		l.Close()
	}
}

// adopt turns a pool member (known: what it was started with, nil to read
// it from containerd) into the sandbox r asks for: its cgroup limits
// are updated in place, its hostname set, the init is given r's env and
// workdir, its stored spec and labels rewritten, so inspect, expiry and
// restarts see the sandbox as if it had been created cold; lns (r's
// published ports, already listening) are served once it is the client's.
func (m *Manager) adopt(ctx context.Context, id string, known *memberInfo, r resolved, img client.Image, imgSpec ocispec.Image, lns []*ports.Listener) (*Sandbox, error) {
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
	var net *netState
	var waitNet func() (*netState, error)
	if r.network == network.ModeEgress {
		if m.cfg.Network == nil {
			return nil, fmt.Errorf("network egress is not available in this boxd (%s)", m.cfg.NetworkErr)
		}
		// The namespace the member was started in, as a cold create's spec names it.
		net = &netState{Mode: r.network, Attachment: network.Attachment{NetNS: m.cfg.Network.NetNSPath(id)}}
		waitNet = m.attachMember(ctx, id, r)
		defer func() { _, _ = waitNet() }() // before a failed member is destroyed
	}
	spec, env, err := m.specFor(ctx, id, r, imgSpec, net, hostID)
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
	if r.tun.Hostname != "" {
		if err := setMemberHostname(pid, hostID, r.tun.Hostname); err != nil {
			return nil, err
		}
		phase("hostname")
	}
	if err := m.setMemberDefaults(ctx, id, r); err != nil {
		return nil, err
	}
	phase("init")
	rec := m.memberRecord(known, r, img)
	rec.Ports = mappings(lns)
	labels := m.labelsFor(rec, r)
	if waitNet != nil {
		if net, err = waitNet(); err != nil {
			return nil, err
		}
		labels[LabelNetwork] = net.label()
		phase("network")
	}
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
	m.servePorts(id, lns)
	m.execDefs.Store(id, Tunables{ExecTimeout: r.tun.ExecTimeout, OutputLimit: r.tun.OutputLimit})
	m.inv.showOwned(id, ownedOf(r))
	m.log.Info("created from the warm pool", "sandbox", id, "image", rec.Image, "memory", rec.Memory, "cpus", rec.CPUs, "pids", rec.Pids, "ttl", r.ttl)
	sb := m.toSandbox(id, labels, rec)
	sb.Env, sb.State, sb.InitPID = env, "running", pid
	return sb, nil
}

// memberRecord is the record of a member handed out for r: a cold
// create's, but for the uid block, shim and runtime it was started with.
func (m *Manager) memberRecord(known *memberInfo, r resolved, img client.Image) record {
	now := time.Now().UTC().Truncate(time.Second)
	rec := record{
		Name: r.name, Image: img.Name(), ImageDigest: img.Target().Digest.String(), Memory: r.limits.MemoryBytes, CPUs: r.limits.CPUs, Pids: r.limits.Pids,
		Workdir: r.workdir, CreatedAt: now, ExpiresAt: now.Add(r.ttl), HostUID: known.hostID, IDMapSize: m.cfg.IDMapSize,
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
	return rec
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
// environment, working directory and default user. The init's answer
// doubles as the liveness check; a member needs it only when the request
// changes its defaults. HOSTNAME goes last, as in a cold create's
// environment. A user the init cannot resolve is the request's error, as
// in a cold create (startinit's ExitBadUser).
func (m *Manager) setMemberDefaults(ctx context.Context, id string, r resolved) error {
	d := wire.Defaults{}
	if r.userSet {
		d.User = r.user
	}
	if len(r.env) > 0 || r.tun.Hostname != "" {
		host := id
		if r.tun.Hostname != "" {
			host = r.tun.Hostname
		}
		d.Env = append(append([]string{}, r.env...), "HOSTNAME="+host)
	}
	if r.workdir != r.imgWorkdir {
		d.Workdir = r.workdir
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl := m.agent(id)
	var err error
	if d.Env != nil || d.Workdir != "" || d.User != "" {
		err = cl.SetDefaults(pctx, d)
	} else {
		err = cl.Ping(pctx)
	}
	var re *wire.RemoteError
	if d.User != "" && errors.As(err, &re) && re.Code == wire.CodeInvalidArgument && strings.HasPrefix(re.Message, "default user:") {
		return fieldErr("user", "the init could not resolve the sandbox's default user: %s", re.Message)
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
