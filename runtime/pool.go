//go:build linux

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/snapshot"
)

// The warm pool keeps sandboxes of the default image started and idle, so
// a create that fits one is a relabel and a cgroup update instead of a
// shim, runc and init start (about 200 ms here). A member serves a request
// for the default image with no env and the default workdir: those were
// handed to the init when it started, and a running init keeps them.
// Members are ordinary containers labelled boxd.io/pool, invisible to
// clients, and survive a boxd restart like any sandbox.
type pool struct {
	mu       sync.Mutex
	ready    []string // ids of started, idle members
	starting int      // members being started
	wake     chan struct{}
}

func (p *pool) addStarting(n int) {
	p.mu.Lock()
	p.starting += n
	p.mu.Unlock()
}

func (p *pool) isStarting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starting > 0
}

func (p *pool) take() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ready) == 0 {
		return "", false
	}
	id := p.ready[0]
	p.ready = p.ready[1:]
	return id, true
}

func (p *pool) put(id string) {
	p.mu.Lock()
	p.ready = append(p.ready, id)
	p.mu.Unlock()
}

func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

func (p *pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// fits reports whether a pool member can serve r.
func (m *Manager) fits(r resolved, img client.Image) bool {
	return m.cfg.PoolSize > 0 && r.network == network.ModeNone && len(r.env) == 0 && r.workdir == "/workspace" && img.Name() == m.defaultImageName() &&
		r.limits.DiskBytes == m.cfg.DefaultLimits.DiskBytes
}

func (m *Manager) defaultImageName() string {
	n, err := snapshot.NormalizeName(m.cfg.DefaultImage)
	if err != nil {
		return ""
	}
	return n
}

// fromPool hands out a pool member for r, or reports false (and the
// caller creates cold).
func (m *Manager) fromPool(ctx context.Context, r resolved, img client.Image) (*Sandbox, bool) {
	if !m.fits(r, img) {
		return nil, false
	}
	for {
		id, ok := m.pool.take()
		if !ok {
			return nil, false
		}
		m.pool.signal()
		sb, err := m.adopt(ctx, id, r)
		if err == nil {
			return sb, true
		}
		m.log.Warn("pool member unusable; destroying it", "sandbox", id, "err", err)
		if ctr, lerr := m.cfg.Client.LoadContainer(ctx, id); lerr == nil {
			_ = m.destroy(context.WithoutCancel(ctx), ctr)
		}
	}
}

// adopt turns a pool member into the sandbox r asks for: its cgroup limits
// are updated in place, its stored spec and labels rewritten, so inspect,
// expiry and restarts see the sandbox as if it had been created cold.
func (m *Manager) adopt(ctx context.Context, id string, r resolved) (*Sandbox, error) {
	if !m.claim(id) {
		return nil, fmt.Errorf("pool member %s is busy", id)
	}
	defer m.release(id)
	t0 := time.Now()
	var phases []any
	phase := func(name string) { phases = append(phases, name, time.Since(t0).Round(time.Microsecond)) }
	defer func() { m.log.Debug("adopt timing", append([]any{"sandbox", id}, phases...)...) }()
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return nil, err
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	err = host.NewClient(m.socketPath(id)).Ping(pctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("init does not answer: %w", err)
	}
	img, err := m.cfg.Images.Get(ctx, r.image)
	if err != nil {
		return nil, err
	}
	if err := sameImage(ctx, ctr, img); err != nil {
		return nil, err
	}
	imgSpec, err := img.Spec(ctx)
	if err != nil {
		return nil, err
	}
	// The member keeps the uid block it was started with.
	cur, err := ctr.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	hostID, _, err := rootHostIDs(cur)
	if err != nil {
		return nil, err
	}
	spec, env, err := m.specFor(ctx, id, r, imgSpec, nil, hostID)
	if err != nil {
		return nil, err
	}
	phase("prepare")
	if err := setLimits(spec.Linux.CgroupsPath, spec.Linux.Resources); err != nil {
		m.log.Debug("direct cgroup update failed; updating through the task", "sandbox", id, "err", err)
		if err := task.Update(ctx, client.WithResources(spec.Linux.Resources)); err != nil {
			return nil, fmt.Errorf("update limits: %w", err)
		}
	}
	phase("limits")
	now := time.Now().UTC().Truncate(time.Second)
	rec := record{
		Name: r.name, Image: img.Name(), ImageDigest: img.Target().Digest.String(), Memory: r.limits.MemoryBytes, CPUs: r.limits.CPUs, Pids: r.limits.Pids,
		Workdir: r.workdir, CreatedAt: now, ExpiresAt: now.Add(r.ttl), HostUID: hostID, IDMapSize: m.cfg.IDMapSize,
	}
	rec = m.withRuntime(rec)
	// The member may have been made by an earlier boxd, on another runc.
	if old, err := ctr.Labels(ctx); err == nil {
		var made record
		if json.Unmarshal([]byte(old[LabelSandbox]), &made) == nil && made.Runtime != "" {
			rec.Runtime, rec.RuntimeVersion, rec.RuntimeAdvisories = made.Runtime, made.RuntimeVersion, made.RuntimeAdvisories
		}
	}
	labels := m.labelsFor(rec, r)
	err = ctr.Update(ctx, client.UpdateContainerOpts(client.WithSpec(spec)), func(_ context.Context, _ *client.Client, c *containers.Container) error {
		c.Labels = labels
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("relabel: %w", err)
	}
	phase("relabel")
	m.inv.showOwned(id, owned{uid: r.owner, memory: r.limits.MemoryBytes})
	m.log.Info("created from the warm pool", "sandbox", id, "memory", rec.Memory, "cpus", rec.CPUs, "pids", rec.Pids, "ttl", r.ttl)
	sb := m.toSandbox(id, labels, rec)
	sb.Env, sb.State, sb.InitPID = env, "running", task.Pid()
	return sb, nil
}

// sameImage checks that a pool member was started from what its image
// name points at now: after a forced replace (boxctl image import --force)
// the idle members hold the old files and must not be handed out as the
// new image. A member without a recorded digest cannot be checked and
// counts as stale.
func sameImage(ctx context.Context, ctr client.Container, img client.Image) error {
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return err
	}
	var rec record
	if err := json.Unmarshal([]byte(labels[LabelSandbox]), &rec); err != nil {
		return fmt.Errorf("corrupt %s label: %w", LabelSandbox, err)
	}
	if want := img.Target().Digest.String(); rec.ImageDigest != want {
		return fmt.Errorf("started from %s@%s, which was replaced by %s", img.Name(), rec.ImageDigest, want)
	}
	return nil
}

// RunPool keeps PoolSize members of the default image ready until ctx
// ends. At start it takes back the members a previous boxd left, and
// destroys those of another image or with a dead init.
func (m *Manager) RunPool(ctx context.Context) {
	if m.cfg.PoolSize <= 0 {
		return
	}
	m.adoptLeftovers(ctx)
	backoff := time.Second
	for {
		for m.pool.size() < m.cfg.PoolSize && ctx.Err() == nil {
			if err := m.addMember(ctx); errdefs.IsResourceExhausted(err) {
				m.log.Debug("warm pool: not refilled", "err", err)
				break
			} else if err != nil {
				m.log.Warn("warm pool: could not start a member", "err", err, "retry_in", backoff)
				break
			}
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-m.pool.wake:
		case <-time.After(backoff):
			backoff = min(2*backoff, time.Minute)
		}
	}
}

func (m *Manager) addMember(ctx context.Context) error {
	r, err := m.resolve(CreateRequest{})
	if err != nil {
		return err
	}
	img, err := m.cfg.Images.Get(ctx, r.image)
	if err != nil {
		return err
	}
	imgSpec, err := img.Spec(ctx)
	if err != nil {
		return err
	}
	// A client's create at max-sandboxes waits for a starting member and
	// then takes its slot (reserve).
	m.pool.addStarting(1)
	defer m.pool.addStarting(-1)
	sb, err := m.createResolved(ctx, time.Now(), r, img, imgSpec, true)
	if err != nil {
		return err
	}
	m.pool.put(sb.ID)
	return nil
}

func (m *Manager) adoptLeftovers(ctx context.Context) {
	ctrs, err := m.cfg.Client.Containers(ctx, fmt.Sprintf(`labels."%s"`, LabelPool))
	if err != nil {
		m.log.Warn("warm pool: list leftovers", "err", err)
		return
	}
	want := m.defaultImageName()
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(ctx)
		ok := err == nil && labels[LabelPool] == want && m.pool.size() < m.cfg.PoolSize
		if ok {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			ok = host.NewClient(m.socketPath(ctr.ID())).Ping(pctx) == nil
			cancel()
		}
		if ok {
			m.pool.put(ctr.ID())
			continue
		}
		if err := m.destroy(ctx, ctr); err != nil && !errdefs.IsNotFound(err) {
			m.log.Warn("warm pool: destroy stale member", "sandbox", ctr.ID(), "err", err)
		}
	}
}
