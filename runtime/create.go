//go:build linux

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/oci"
)

// Create makes and starts a sandbox and returns once its init answers. A
// create that fails at any step removes everything it made.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Sandbox, error) {
	t0 := time.Now()
	r, err := m.resolve(req)
	if err != nil {
		return nil, err
	}
	r.owner = ownerUID(ctx)
	if err := checkPublish(ctx, r.publish); err != nil {
		return nil, err
	}
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	img, err := m.cfg.Images.Get(ctx, r.image)
	if err != nil {
		if errdefs.IsInvalidArgument(err) {
			return nil, fieldErr("image", "%v", err)
		}
		return nil, err
	}
	imgSpec, err := m.specs.get(ctx, img)
	if err != nil {
		return nil, fmt.Errorf("image %s: read config: %w", r.image, err)
	}
	if r, err = withImage(r, imgSpec.Config); err != nil {
		return nil, err
	}

	if r.name != "" {
		// Creates run in parallel; only two with the same name and owner
		// must not. Another user's name does not block this one's.
		key := fmt.Sprintf("name:%d:%s", r.owner, r.name)
		if !m.claim(key) {
			return nil, fmt.Errorf("a sandbox named %q is being created: %w", r.name, errdefs.ErrAlreadyExists)
		}
		defer m.release(key)
		if _, err := m.find(WithCaller(ctx, Caller{UID: r.owner}), r.name); err == nil {
			if !req.Replace {
				return nil, fmt.Errorf("a sandbox named %q already exists: %w", r.name, errdefs.ErrAlreadyExists)
			}
			if err := m.DeleteGraceful(WithCaller(ctx, Caller{UID: r.owner}), r.name, DefaultStopGrace); err != nil && !errdefs.IsNotFound(err) {
				return nil, fmt.Errorf("replace the sandbox named %q: %w", r.name, err)
			}
		} else if !errdefs.IsNotFound(err) {
			return nil, err
		}
	}
	// The owner's quota share is held from here until the sandbox is
	// counted as visible (or the create failed).
	releaseQuota, err := m.reserveQuota(r)
	if err != nil {
		return nil, err
	}
	defer releaseQuota()
	// Refills wait while creates are being served (pool.holdOff).
	m.pool.serveBegin()
	defer m.pool.serveEnd()
	// A create the pool cannot serve (fits) is made cold.
	if sb, ok := m.fromPool(ctx, r, img, imgSpec); ok {
		m.created(sb.ID)
		return sb, nil
	}
	sb, err := m.createResolved(ctx, t0, r, img, imgSpec, false)
	if err == nil {
		m.created(sb.ID)
	}
	return sb, err
}

// created records a new client-visible sandbox: events, and its idle
// clock starts now.
func (m *Manager) created(id string) {
	m.touch(id)
	m.emit(events.Created, id, nil)
	m.emit(events.Started, id, nil)
}

// createResolved makes a sandbox from a validated request; a pool member
// carries the pool label instead of the managed one, so clients do not see
// it until it is handed out.
func (m *Manager) createResolved(ctx context.Context, t0 time.Time, r resolved, img client.Image, imgSpec ocispec.Image, member bool) (_ *Sandbox, retErr error) {
	id := newID()
	m.claim(id)
	defer m.release(id)
	if err := m.admit(ctx, id, member); err != nil {
		return nil, err
	}
	phases := make([]any, 0, 12)
	phase := func(name string) {
		phases = append(phases, name, time.Since(t0).Round(time.Microsecond))
	}
	phase("image")
	hostID, err := m.ids.take(ctx, m)
	if err != nil {
		m.inv.forget(id)
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	var shimGroup string
	// Only runc sandboxes share shims: a group's shim socket follows from
	// its name, so a gVisor sandbox in a runc group would reach runc's.
	if m.shims.enabled() && r.runtime != RuntimeGvisor {
		if shimGroup, err = m.shims.take(ctx, m); err != nil {
			m.ids.give(hostID)
			m.inv.forget(id)
			return nil, fmt.Errorf("create sandbox %s: %w", id, err)
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	rec := record{
		ShimGroup: shimGroup,
		Name:      r.name, Image: img.Name(), ImageDigest: img.Target().Digest.String(), Memory: r.limits.MemoryBytes, CPUs: r.limits.CPUs, Pids: r.limits.Pids,
		Workdir: r.workdir, CreatedAt: now, ExpiresAt: now.Add(r.ttl), HostUID: hostID, IDMapSize: m.cfg.IDMapSize,
		Disk: r.limits.DiskBytes,
		User: r.user, Tunables: r.tun,
	}
	rec.Runtime = r.runtime
	rec = m.withRuntime(rec)
	log := m.log.With("sandbox", id)

	// Undo in reverse order whatever got made, whatever step failed. The
	// uid block goes back first in this list, so last: after the
	// container and its writable layer are gone.
	undo := []func(context.Context){func(context.Context) { m.inv.forget(id) }, func(context.Context) {
		m.ids.give(hostID)
		m.shims.give(shimGroup)
	}}
	defer func() {
		if retErr == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](cctx)
		}
		log.Warn("create failed, cleaned up", "err", retErr)
	}()

	if err := os.MkdirAll(m.sandboxDir(id), 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox %s: state dir: %w", id, err)
	}
	undo = append(undo, func(context.Context) { _ = os.RemoveAll(m.sandboxDir(id)) })

	// The network namespace is made while the container is created and
	// attached (CNI, firewall) while the task is created; the namespace
	// must exist before the task is created (runc joins it then) and the
	// attach be finished before the task starts. The spec joins it by path.
	net, waitNetNS, waitNet, err := m.startNetwork(ctx, id, r)
	if net != nil {
		undo = append(undo, func(c context.Context) {
			if waitNet != nil {
				_, _ = waitNet() // let the attach finish before undoing it
			}
			if err := m.teardownNetwork(c, id); err != nil {
				log.Error("cleanup: network", "err", err)
			}
		})
	}
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", id, err)
	}
	var beforeTask, beforeStart func() error
	// netCtr is the container once made; netLabelErr gets the result of
	// storing the attached network in its label (beforeStart starts that).
	var (
		netCtr      client.Container
		netLabel    string
		netLabelErr = make(chan error, 1)
	)
	if waitNet != nil {
		beforeTask = func() error {
			err := waitNetNS()
			phase("netns")
			return err
		}
		beforeStart = func() error {
			full, err := waitNet()
			if err != nil {
				return err
			}
			net = full
			phase("network")
			// The label gets the address CNI handed out while the init
			// starts: a containerd metadata write, which on a busy host
			// took as long as the rest of an egress create's extra time.
			// Create waits for it before it returns.
			netLabel = net.label()
			go func() {
				_, err := netCtr.SetLabels(ctx, map[string]string{LabelNetwork: netLabel})
				netLabelErr <- err
			}()
			return nil
		}
	}

	spec, env, err := m.specFor(ctx, id, r, imgSpec, net, hostID)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: spec: %w", id, err)
	}
	if shimGroup != "" {
		if spec.Annotations == nil {
			spec.Annotations = map[string]string{}
		}
		spec.Annotations[ShimGroupAnnotation] = shimGroup
	}
	if r.runtime == RuntimeGvisor {
		for k, v := range gvisor.Annotations(id) {
			spec.Annotations[k] = v
		}
	}

	// Listen before anything else is made, so a host port in use fails
	// the create early; connections wait in the backlog until the init
	// is ready.
	lns, err := bindPorts(ctx, "publish", r.publish)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func(context.Context) {
		for _, l := range lns {
			l.Close()
		}
	})
	rec.Ports = mappings(lns)

	labels := m.labelsFor(rec, r)
	if net != nil {
		labels[LabelNetwork] = net.label()
	}
	if member {
		labels = map[string]string{LabelPool: rec.Image, LabelSandbox: labels[LabelSandbox]}
	}
	uidMap := []specs.LinuxIDMapping{{ContainerID: 0, HostID: hostID, Size: m.cfg.IDMapSize}}
	gidMap := []specs.LinuxIDMapping{{ContainerID: 0, HostID: hostID, Size: m.cfg.IDMapSize}}

	// A lease keeps the new snapshot from garbage collection until the
	// container references it.
	lctx, done, err := m.cfg.Client.WithLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: lease: %w", id, err)
	}
	defer done(context.WithoutCancel(lctx))

	newSnapshot := client.WithNewSnapshot(id, img, client.WithUserNSRemapperLabels(uidMap, gidMap))
	if r.forkParent != "" {
		newSnapshot = withSnapshotOn(id, r.forkParent, client.WithUserNSRemapperLabels(uidMap, gidMap))
	}
	ctr, err := m.cfg.Client.NewContainer(lctx, id,
		client.WithImage(img),
		client.WithSnapshotter(m.cfg.Images.Snapshotter()),
		newSnapshot,
		client.WithSpec(spec),
		m.containerRuntime(r.runtime),
		client.WithContainerLabels(labels),
	)
	if err != nil {
		// NewContainer may have prepared the snapshot before failing.
		undo = append(undo, func(c context.Context) { m.removeSnapshot(c, id) })
		return nil, fmt.Errorf("create sandbox %s: container: %w", id, err)
	}
	phase("container")
	undo = append(undo, func(c context.Context) {
		if err := ctr.Delete(c, client.WithSnapshotCleanup); err != nil {
			log.Error("cleanup: delete container", "err", err)
		}
	})
	if rec.Disk > 0 {
		// The writable layer moves onto its own filesystem before
		// anything is written to it.
		layer, err := m.diskLayer(ctx, id, m.cfg.Images.Snapshotter(), id)
		if err == nil {
			err = layer.Create(rec.Disk)
		}
		if err != nil {
			return nil, fmt.Errorf("create sandbox %s: %w", id, err)
		}
		undo = append(undo, func(context.Context) {
			if err := layer.Unmount(); err != nil {
				log.Error("cleanup: disk", "err", err)
			}
		})
		phase("disk")
	}

	netCtr = ctr
	task, err := m.startInit(ctx, ctr, spec, phase, beforeTask, beforeStart)
	if err != nil {
		return nil, m.explainFailure(fmt.Errorf("create sandbox %s: %w", id, err))
	}
	if net != nil {
		if err := <-netLabelErr; err != nil {
			return nil, fmt.Errorf("create sandbox %s: store network: %w", id, err)
		}
		labels[LabelNetwork] = netLabel
		phase("label")
	}
	m.servePorts(id, lns)
	m.execDefs.Store(id, Tunables{ExecTimeout: r.tun.ExecTimeout, OutputLimit: r.tun.OutputLimit})
	if !member {
		m.inv.showOwned(id, ownedOf(r))
	}
	log.Debug("create timing", phases...)
	log.Info("created", "image", rec.Image, "memory", rec.Memory, "cpus", rec.CPUs, "pids", rec.Pids, "ttl", r.ttl)
	sb := m.toSandbox(id, labels, rec)
	sb.Env = env
	if net != nil {
		log.Info("network egress", "addr", net.Addr, "allow", net.Allow)
	}
	sb.State = "running"
	sb.InitPID = task.Pid()
	return sb, nil
}

// specFor builds a sandbox's runtime-spec for the uid block at hostID; env is the environment commands
// see (without the HOSTNAME boxd adds). The spec carries it, with the
// workdir and pids limit, in the annotation the init is handed at start.
func (m *Manager) specFor(ctx context.Context, id string, r resolved, imgSpec ocispec.Image, net *netState, hostID uint32) (*specs.Spec, []string, error) {
	var netns, resolvConf string
	if net != nil {
		netns, resolvConf = net.NetNS, m.resolvConfPath(id)
	}
	env := append(append([]string{}, imgSpec.Config.Env...), r.env...)
	hostname := id
	if r.tun.Hostname != "" {
		hostname = r.tun.Hostname
	}
	var tmpfs []oci.Tmpfs
	var tmpSize, shmSize int64
	for _, t := range r.tun.Tmpfs {
		switch t.Path {
		case "/tmp":
			tmpSize = t.SizeBytes
		case devShm:
			shmSize = t.SizeBytes
		default:
			tmpfs = append(tmpfs, oci.Tmpfs{Path: t.Path, SizeBytes: t.SizeBytes})
		}
	}
	spec, err := oci.Spec(ctx, oci.Config{
		ID: id, Hostname: hostname, Workdir: r.workdir, User: r.user,
		ReadOnlyRootfs: r.tun.ReadOnly, TmpSizeBytes: tmpSize, ShmSizeBytes: shmSize, Tmpfs: tmpfs,
		NoFile: r.tun.Ulimits.NoFile, NProc: r.tun.Ulimits.NProc, FSize: r.tun.Ulimits.FSize, CPUTime: r.tun.Ulimits.CPU,
		CPUShares: cpuShares(r.tun.CPUWeight), MemoryLow: r.tun.MemoryLow,
		Env:         append(slices.Clip(env), "HOSTNAME="+hostname),
		MemoryBytes: r.limits.MemoryBytes, CPUs: r.limits.CPUs, Pids: r.limits.Pids,
		HostUID: hostID, HostGID: hostID, IDMapSize: m.cfg.IDMapSize,
		InitBinary: m.cfg.InitBinary, ChannelDir: m.handoffDir(id), AgentDir: m.gvAgentDirFor(id, r.runtime),
		CgroupsPath: m.cgPath(id),
		NetNSPath:   netns, ResolvConf: resolvConf,
	})
	var fe *oci.FieldError
	if errors.As(err, &fe) && fe.Field == "Env" {
		// Only an image's env can be this large (a request's is capped).
		return nil, nil, fieldErr("image", "%s: its environment is too large: %v", r.image, err)
	}
	return spec, env, err
}

// labelsFor is every label a client-visible sandbox carries: its record,
// expiry, name and the user's labels.
func (m *Manager) labelsFor(rec record, r resolved) map[string]string {
	recJSON, _ := json.Marshal(rec)
	labels := map[string]string{LabelManaged: "true", LabelSandbox: string(recJSON), LabelExpiresAt: rec.ExpiresAt.Format(time.RFC3339),
		LabelOwner: strconv.FormatUint(uint64(r.owner), 10)}
	if r.name != "" {
		labels[LabelName] = r.name
	}
	if v := portsLabel(rec.Ports); v != "" {
		labels[LabelPorts] = v
	}
	if v := idleLabel(r.idle); v != "" {
		labels[LabelIdle] = v
	}
	for k, v := range r.labels {
		labels[UserLabelPrefix+k] = v
	}
	return labels
}
