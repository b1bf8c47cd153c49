//go:build linux

// Room: create. One cold create in progress (creation): each step of
// createResolved, what it took and how to undo it.

package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/containerd/containerd/v2/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/internal/gvisor"
)

// creation is one create in progress: what it has taken and made so far,
// and how to undo each.
type creation struct {
	m      *Manager
	id     string
	r      resolved
	rec    record
	log    *slog.Logger
	t0     time.Time
	phases []any // name, time since t0: the create's timing log
	undo   []func(context.Context)

	hostID    uint32
	shimGroup string

	// net is the sandbox's network (nil: none), complete once waitNet
	// returns; waitNetNS returns once its namespace exists. netCtr is the
	// container once made; netLabelErr gets the result of storing the
	// attached network (netLabel) in its label.
	net         *netState
	waitNetNS   func() error
	waitNet     func() (*netState, error)
	netCtr      client.Container
	netLabel    string
	netLabelErr chan error
}

// phase marks progress for the timing log.
func (c *creation) phase(name string) {
	c.phases = append(c.phases, name, time.Since(c.t0).Round(time.Microsecond))
}

// onFail adds an undo step, run (last added first) if the create fails.
func (c *creation) onFail(f func(context.Context)) { c.undo = append(c.undo, f) }

// rollback undoes whatever got made, in reverse order.
func (c *creation) rollback(ctx context.Context, err error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for i := len(c.undo) - 1; i >= 0; i-- {
		c.undo[i](cctx)
	}
	c.log.Warn("create failed, cleaned up", "err", err)
}

// takeIDs takes the sandbox's uid block and its place in a shared shim.
// The uid block goes back first in the undo list, so last: after the
// container and its writable layer are gone.
func (c *creation) takeIDs(ctx context.Context) error {
	m := c.m
	hostID, err := m.ids.take(ctx, m)
	if err != nil {
		m.inv.forget(c.id)
		return err
	}
	var shimGroup string
	// Only runc sandboxes share shims: a group's shim socket follows from
	// its name, so a gVisor sandbox in a runc group would reach runc's.
	if m.shims.enabled() && c.r.runtime != RuntimeGvisor {
		if shimGroup, err = m.shims.take(ctx, m); err != nil {
			m.ids.give(hostID)
			m.inv.forget(c.id)
			return err
		}
	}
	c.hostID, c.shimGroup = hostID, shimGroup
	c.onFail(func(context.Context) { m.inv.forget(c.id) })
	c.onFail(func(context.Context) {
		m.ids.give(hostID)
		m.shims.give(shimGroup)
	})
	return nil
}

// newRecord sets the record the sandbox's label stores.
func (c *creation) newRecord(img client.Image) {
	r := c.r
	now := time.Now().UTC().Truncate(time.Second)
	rec := record{
		ShimGroup: c.shimGroup,
		Name:      r.name, Image: img.Name(), ImageDigest: img.Target().Digest.String(), Memory: r.limits.MemoryBytes, CPUs: r.limits.CPUs, Pids: r.limits.Pids,
		Workdir: r.workdir, CreatedAt: now, ExpiresAt: now.Add(r.ttl), HostUID: c.hostID, IDMapSize: c.m.cfg.IDMapSize,
		Disk: r.limits.DiskBytes,
		User: r.user, Tunables: r.tun, Volumes: r.volumes, Binds: r.binds, BindCreds: r.bindCreds,
	}
	rec.Runtime = r.runtime
	c.rec = c.m.withRuntime(rec)
}

// startNetwork makes the network namespace while the container is created
// and attaches it (CNI, firewall) while the task is created: the namespace
// must exist before the task is created (runc joins it then) and the
// attach be finished before the task starts. The spec joins it by path.
func (c *creation) startNetwork(ctx context.Context, member bool) error {
	var err error
	if member {
		c.net, err = c.m.memberNetwork(c.id, c.r)
	} else {
		c.net, c.waitNetNS, c.waitNet, err = c.m.startNetwork(ctx, c.id, c.r)
	}
	if c.net != nil {
		waitNet := c.waitNet
		c.onFail(func(ctx context.Context) {
			if waitNet != nil {
				_, _ = waitNet() // let the attach finish before undoing it
			}
			if err := c.m.teardownNetwork(ctx, c.id); err != nil {
				c.log.Error("cleanup: network", "err", err)
			}
		})
	}
	return err
}

// networkHooks are startInit's beforeTask and beforeStart: wait for the
// namespace, then for the attach (nil without a network to wait for).
func (c *creation) networkHooks(ctx context.Context) (beforeTask, beforeStart func() error) {
	if c.waitNet == nil {
		return nil, nil
	}
	c.netLabelErr = make(chan error, 1)
	beforeTask = func() error {
		err := c.waitNetNS()
		c.phase("netns")
		return err
	}
	beforeStart = func() error {
		full, err := c.waitNet()
		if err != nil {
			return err
		}
		c.net = full
		c.phase("network")
		// The label gets the address CNI handed out while the init
		// starts: a containerd metadata write, which on a busy host
		// took as long as the rest of an egress create's extra time.
		// Create waits for it before it returns.
		c.netLabel = c.net.label()
		go func() {
			_, err := c.netCtr.SetLabels(ctx, map[string]string{LabelNetwork: c.netLabel})
			c.netLabelErr <- err
		}()
		return nil
	}
	return beforeTask, beforeStart
}

// spec is the sandbox's runtime-spec with its shim group's and runtime's
// annotations, and the environment commands see.
func (c *creation) spec(ctx context.Context, imgSpec ocispec.Image) (*specs.Spec, []string, error) {
	spec, env, err := c.m.specFor(ctx, c.id, c.r, imgSpec, c.net, c.hostID)
	if err != nil {
		return nil, nil, err
	}
	spec.Mounts = append(spec.Mounts, c.m.volumeSpecMounts(c.r.volumes, c.hostID)...)
	spec.Mounts = append(spec.Mounts, c.m.bindSpecMounts(c.id, c.r.binds, c.r.bindCreds, c.hostID)...)
	sm, err := c.m.secretMounts(c.id, c.r)
	if err != nil {
		return nil, nil, err
	}
	spec.Mounts = append(spec.Mounts, sm...)
	if c.shimGroup != "" {
		if spec.Annotations == nil {
			spec.Annotations = map[string]string{}
		}
		spec.Annotations[ShimGroupAnnotation] = c.shimGroup
	}
	if c.r.runtime == RuntimeGvisor {
		for k, v := range gvisor.Annotations(c.id) {
			spec.Annotations[k] = v
		}
	}
	return spec, env, nil
}

// labels is what the container carries: a client-visible sandbox's
// labels, or a pool member's.
func (c *creation) labels(member bool) map[string]string {
	labels := c.m.labelsFor(c.rec, c.r)
	if c.net != nil {
		labels[LabelNetwork] = c.net.label()
	}
	if member {
		labels = map[string]string{LabelPool: c.rec.Image, LabelSandbox: labels[LabelSandbox]}
		if c.net != nil {
			labels[LabelPoolNetwork] = c.net.Mode
		}
	}
	return labels
}

// newContainer makes the container and its writable layer under a lease
// that keeps the new snapshot from garbage collection until the container
// references it; the caller ends the lease with leaseDone.
func (c *creation) newContainer(ctx context.Context, img client.Image, spec *specs.Spec, labels map[string]string) (_ client.Container, leaseDone func(), _ error) {
	m, id := c.m, c.id
	uidMap := []specs.LinuxIDMapping{{ContainerID: 0, HostID: c.hostID, Size: m.cfg.IDMapSize}}
	gidMap := []specs.LinuxIDMapping{{ContainerID: 0, HostID: c.hostID, Size: m.cfg.IDMapSize}}
	lctx, done, err := m.cfg.Client.WithLease(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("create sandbox %s: lease: %w", id, err)
	}
	leaseDone = func() { _ = done(context.WithoutCancel(lctx)) }
	newSnapshot := client.WithNewSnapshot(id, img, client.WithUserNSRemapperLabels(uidMap, gidMap))
	if c.r.forkParent != "" {
		newSnapshot = withSnapshotOn(id, c.r.forkParent, client.WithUserNSRemapperLabels(uidMap, gidMap))
	}
	ctr, err := m.cfg.Client.NewContainer(lctx, id,
		client.WithImage(img),
		client.WithSnapshotter(m.cfg.Images.Snapshotter()),
		newSnapshot,
		client.WithSpec(spec),
		m.containerRuntime(c.r.runtime, c.r.network),
		client.WithContainerLabels(labels),
	)
	if err != nil {
		// NewContainer may have prepared the snapshot before failing.
		c.onFail(func(ctx context.Context) { m.removeSnapshot(ctx, id) })
		leaseDone()
		return nil, nil, fmt.Errorf("create sandbox %s: container: %w", id, err)
	}
	c.phase("container")
	c.onFail(func(ctx context.Context) {
		if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil {
			c.log.Error("cleanup: delete container", "err", err)
		}
	})
	return ctr, leaseDone, nil
}

// capDisk moves a capped writable layer onto its own filesystem before
// anything is written to it.
func (c *creation) capDisk(ctx context.Context) error {
	if c.rec.Disk <= 0 {
		return nil
	}
	layer, err := c.m.diskLayer(ctx, c.id, c.m.cfg.Images.Snapshotter(), c.id)
	if err == nil {
		err = layer.Create(c.rec.Disk)
	}
	if err != nil {
		return err
	}
	c.onFail(func(context.Context) {
		if err := layer.Unmount(); err != nil {
			c.log.Error("cleanup: disk", "err", err)
		}
	})
	c.phase("disk")
	return nil
}

// done logs the finished create and reports its sandbox.
func (c *creation) done(labels map[string]string, env []string, task client.Task) *Sandbox {
	c.log.Debug("create timing", c.phases...)
	c.log.Info("created", "image", c.rec.Image, "memory", c.rec.Memory, "cpus", c.rec.CPUs, "pids", c.rec.Pids, "ttl", c.r.ttl)
	sb := c.m.toSandbox(c.id, labels, c.rec)
	sb.Env = env
	if c.net != nil {
		c.log.Info("network egress", "addr", c.net.Addr, "allow", c.net.Allow)
	}
	sb.State = "running"
	sb.InitPID = task.Pid()
	return sb
}
