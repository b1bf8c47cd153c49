//go:build linux

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/snapshot"
)

// The warm pool keeps sandboxes of chosen images started and idle, so a
// create that fits one is a relabel, a cgroup update and (for a custom env
// or workdir) one call to the init instead of a shim, runc and init start
// (about 200 ms here; under gVisor a shim, runsc create and start, and the
// Sentry's boot: most of a second). Each image and runtime has its own
// target size (--warm-pool IMAGE=N or IMAGE=N@gvisor, SetPoolSize at run
// time). Members are ordinary containers
// labelled boxd.io/pool (value: the image), invisible to clients and
// quotas, and survive a boxd restart like any sandbox. A member is handed
// out once: adoption turns it into a client's sandbox for good, and a
// member whose adoption failed half-way is destroyed, never put back.

// MaxPoolSize bounds one image's pool.
const MaxPoolSize = 1000

// poolFillers is how many members are started at once: enough to refill
// a large pool quickly, few enough not to starve the creates being served.
const poolFillers = 4

// handedMarker is the file, in a member's state directory, written before
// its adoption changes anything in it: a boxd killed during an adoption
// finds it at restart and destroys the member instead of taking it back.
const handedMarker = "handed"

// PoolSize is one image's warm-pool target on one runtime.
type PoolSize struct {
	Image   string
	Runtime string // RuntimeRunc or RuntimeGvisor; "" is runc
	Size    int
}

// PoolStatus is one image's pool on one runtime as it stands.
type PoolStatus struct {
	Image    string // normalized name
	Runtime  string // RuntimeRunc or RuntimeGvisor
	Size     int    // target
	Ready    int    // started, idle members
	Starting int    // members being started
}

// poolKey names one pool: an image's members on one runtime. A member's
// image is its pool label's value and its runtime its record's, so a
// restarted boxd files each member it takes back under the right key.
type poolKey struct {
	image, runtime string
}

// keyOf is the pool key of image on runtime ("" is runc).
func keyOf(image, runtime string) poolKey {
	if runtime == "" {
		runtime = RuntimeRunc
	}
	return poolKey{image: image, runtime: runtime}
}

type imagePool struct {
	want     int
	ready    []string
	starting int
	retryAt  time.Time // after a failed start
	backoff  time.Duration
}

type pool struct {
	mu   sync.Mutex
	by   map[poolKey]*imagePool // by normalized image name and runtime
	wake chan struct{}

	// known holds what this boxd recorded when it started each member,
	// so an adoption needs neither a metadata read nor a task lookup
	// (round trips through containerd, and to the shim, that a burst of
	// creates pays for a hundred times over on a loaded host). A member
	// taken back after a restart has no entry and is read from
	// containerd.
	known map[string]memberInfo

	// Creates being served, and when the last one ended: refills wait
	// for a lull (holdOff).
	serving   int
	lastServe time.Time
	holdSince time.Time // when the current hold-off began; zero if none
}

// A member start is a shim, runc and init start plus several containerd
// metadata commits (each an fsync, serialized in containerd's database):
// on a small host a few of them running beside a burst of creates take
// the cores and the metadata writes the burst's adoptions wait for. So
// refills wait until no create has been served for refillQuiet (which
// also covers the first commands that follow the creates), but never
// longer than refillMaxHold in a row, so a steady stream of creates still
// gets its pool back.
const (
	refillQuiet   = 500 * time.Millisecond
	refillMaxHold = 3 * time.Second
)

// serveBegin and serveEnd bracket a create (pooled or cold).
func (p *pool) serveBegin() {
	p.mu.Lock()
	p.serving++
	p.mu.Unlock()
}

func (p *pool) serveEnd() {
	p.mu.Lock()
	p.serving--
	p.lastServe = time.Now()
	p.mu.Unlock()
}

// holdOff is how long refills should still wait at now; 0: start them.
func (p *pool) holdOff(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := time.Duration(0)
	if p.serving > 0 {
		wait = refillQuiet
	} else if d := refillQuiet - now.Sub(p.lastServe); d > 0 {
		wait = d
	}
	if wait == 0 {
		p.holdSince = time.Time{}
		return 0
	}
	if p.holdSince.IsZero() {
		p.holdSince = now
	}
	if left := refillMaxHold - now.Sub(p.holdSince); left < wait {
		if left <= 0 {
			// Held long enough: let this round of refills start, and a
			// new hold-off begin after it.
			p.holdSince = time.Time{}
			return 0
		}
		wait = left
	}
	return wait
}

func (p *pool) get(k poolKey) *imagePool {
	if p.by == nil {
		p.by = map[poolKey]*imagePool{}
	}
	ip := p.by[k]
	if ip == nil {
		ip = &imagePool{}
		p.by[k] = ip
	}
	return ip
}

func (p *pool) setWant(k poolKey, n int) {
	p.mu.Lock()
	ip := p.get(k)
	ip.want, ip.retryAt, ip.backoff = n, time.Time{}, 0
	p.mu.Unlock()
	p.signal()
}

func (p *pool) wanted(k poolKey) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ip := p.by[k]; ip != nil {
		return ip.want
	}
	return 0
}

func (p *pool) isStarting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ip := range p.by {
		if ip.starting > 0 {
			return true
		}
	}
	return false
}

// take hands out a ready member of pool k and what is known of it (nil:
// read it from containerd); each id is handed out once.
func (p *pool) take(k poolKey) (string, *memberInfo, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip := p.by[k]
	if ip == nil || len(ip.ready) == 0 {
		return "", nil, false
	}
	id := ip.ready[0]
	ip.ready = ip.ready[1:]
	var info *memberInfo
	if mi, ok := p.known[id]; ok {
		info = &mi
		delete(p.known, id)
	}
	return id, info, true
}

// takeAll takes every ready member of image, on any runtime, out of the
// pool.
func (p *pool) takeAll(image string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for k, ip := range p.by {
		if k.image != image {
			continue
		}
		ids = append(ids, ip.ready...)
		ip.ready = nil
	}
	for _, id := range ids {
		delete(p.known, id)
	}
	return ids
}

// takeAny hands out a ready member of any image (to make room under
// max-sandboxes), preferring the image with the most.
func (p *pool) takeAny() (string, bool) {
	p.mu.Lock()
	var best *imagePool
	for _, ip := range p.by {
		if len(ip.ready) > 0 && (best == nil || len(ip.ready) > len(best.ready)) {
			best = ip
		}
	}
	p.mu.Unlock()
	if best == nil {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(best.ready) == 0 {
		return "", false
	}
	id := best.ready[len(best.ready)-1]
	best.ready = best.ready[:len(best.ready)-1]
	delete(p.known, id)
	return id, true
}

// memberInfo is what a member was started with, as its label records it.
type memberInfo struct {
	pid         uint32 // its init's
	hostID      uint32 // first host id of its uid block
	shimGroup   string // the shim it shares ("": its own)
	imageDigest string
	runtime     RuntimeInfo
}

// put adds a ready member of pool k; info is nil if not known.
func (p *pool) put(k poolKey, id string, info *memberInfo) {
	p.mu.Lock()
	if info != nil {
		if p.known == nil {
			p.known = map[string]memberInfo{}
		}
		p.known[id] = *info
	}
	ip := p.get(k)
	ip.ready = append(ip.ready, id)
	ip.backoff, ip.retryAt = 0, time.Time{}
	p.mu.Unlock()
}

// surplus takes out the ready members above each image's target.
func (p *pool) surplus() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, ip := range p.by {
		for len(ip.ready) > ip.want {
			out = append(out, ip.ready[len(ip.ready)-1])
			delete(p.known, ip.ready[len(ip.ready)-1])
			ip.ready = ip.ready[:len(ip.ready)-1]
		}
	}
	return out
}

// next picks a pool short of members and counts one more starting for
// it; false when none needs one now.
func (p *pool) next(now time.Time) (poolKey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]poolKey, 0, len(p.by))
	for k := range p.by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	// The pool with the largest gap first, so one big pool does not keep
	// a small one empty.
	var best poolKey
	gap := 0
	for _, k := range keys {
		ip := p.by[k]
		if g := ip.want - len(ip.ready) - ip.starting; g > gap && !now.Before(ip.retryAt) {
			best, gap = k, g
		}
	}
	if gap == 0 {
		return poolKey{}, false
	}
	p.by[best].starting++
	return best, true
}

func keyLess(a, b poolKey) bool {
	if a.image != b.image {
		return a.image < b.image
	}
	return a.runtime < b.runtime
}

// started ends a member start of pool k; err says how it went.
func (p *pool) started(k poolKey, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip := p.get(k)
	ip.starting--
	if err != nil {
		// Short: a missing image may be imported, a full max-sandboxes freed,
		// any moment, and a failed attempt costs little.
		ip.backoff = min(max(2*ip.backoff, time.Second), 5*time.Second)
		ip.retryAt = time.Now().Add(ip.backoff)
	}
}

func (p *pool) status() []PoolStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PoolStatus, 0, len(p.by))
	for k, ip := range p.by {
		if ip.want == 0 && len(ip.ready) == 0 && ip.starting == 0 {
			continue
		}
		out = append(out, PoolStatus{Image: k.image, Runtime: k.runtime, Size: ip.want, Ready: len(ip.ready), Starting: ip.starting})
	}
	sort.Slice(out, func(i, j int) bool {
		return keyLess(poolKey{out[i].Image, out[i].Runtime}, poolKey{out[j].Image, out[j].Runtime})
	})
	return out
}

func (p *pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// poolImage is the name pools are keyed by: the image name normalized as
// the image store does ("" for the default image).
func (m *Manager) poolImage(image string) (string, error) {
	if image == "" {
		image = m.cfg.DefaultImage
	}
	n, err := snapshot.NormalizeName(image)
	if err != nil {
		return "", fieldErr("image", "%v", err)
	}
	return n, nil
}

// SetPoolSize changes the target of an image's pool on runtime ("":
// runc) at run time (0 empties it). The image must exist, and gVisor be
// available for a gVisor pool. Members are started or destroyed in the
// background; the target lasts until boxd restarts, which takes its
// flags' sizes again.
func (m *Manager) SetPoolSize(ctx context.Context, image, runtime string, n int) error {
	if n < 0 || n > MaxPoolSize {
		return fieldErr("size", "%d must be from 0 to %d", n, MaxPoolSize)
	}
	if m.cfg.MaxSandboxes > 0 && n > m.cfg.MaxSandboxes {
		return fieldErr("size", "%d members would not fit under the daemon's max-sandboxes of %d", n, m.cfg.MaxSandboxes)
	}
	name, err := m.poolImage(image)
	if err != nil {
		return err
	}
	rt, err := m.poolRuntime(runtime)
	if err != nil {
		return err
	}
	if n > 0 {
		ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
		if _, err := m.cfg.Images.Get(ctx, name); err != nil {
			if errdefs.IsNotFound(err) {
				return fmt.Errorf("image: %s is not present (import or pull it first): %w", name, errdefs.ErrNotFound)
			}
			return err
		}
	}
	m.pool.setWant(keyOf(name, rt), n)
	m.log.Info("warm pool size set", "image", name, "runtime", rt, "size", n)
	return nil
}

// poolRuntime checks a pool's runtime ("" is runc, whatever the daemon's
// default runtime: a pool says what its members run on); gVisor must be
// available.
func (m *Manager) poolRuntime(name string) (string, error) {
	rt, err := ParseRuntime("runtime", name)
	if err != nil {
		return "", err
	}
	if rt == "" {
		rt = RuntimeRunc
	}
	return m.pickRuntime(rt)
}

// PoolStatus lists every image's pool.
func (m *Manager) PoolStatus() []PoolStatus { return m.pool.status() }

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
	if err := setLimits(spec.Linux.CgroupsPath, spec.Linux.Resources); err != nil {
		m.log.Debug("direct cgroup update failed; updating through the task", "sandbox", id, "err", err)
		task, err := m.loadTask(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := task.Update(ctx, client.WithResources(spec.Linux.Resources)); err != nil {
			return nil, fmt.Errorf("update limits: %w", err)
		}
	}
	phase("limits")
	// The init's answer doubles as the liveness check; a member needs it
	// only when the request changes its defaults. HOSTNAME goes last, as
	// in a cold create's environment.
	d := wire.Defaults{}
	if len(r.env) > 0 {
		d.Env = append(append([]string{}, r.env...), "HOSTNAME="+id)
	}
	if r.workdir != r.imgWorkdir {
		d.Workdir = r.workdir
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	cl := m.agent(id)
	if d.Env != nil || d.Workdir != "" {
		err = cl.SetDefaults(pctx, d)
	} else {
		err = cl.Ping(pctx)
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
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

// RunPool keeps every image's pool at its target until ctx ends, starting
// up to poolFillers members at once and destroying members above a
// lowered target. At start it takes back the members a previous boxd
// left, and destroys those it has no use for.
func (m *Manager) RunPool(ctx context.Context) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	for _, ps := range m.cfg.Pools {
		name, err := m.poolImage(ps.Image)
		if err != nil {
			m.log.Error("warm pool: bad image", "image", ps.Image, "err", err)
			continue
		}
		rt, err := m.poolRuntime(ps.Runtime)
		if err != nil {
			m.log.Error("warm pool: runtime", "image", ps.Image, "runtime", ps.Runtime, "err", err)
			continue
		}
		m.pool.setWant(keyOf(name, rt), ps.Size)
	}
	m.adoptLeftovers(ctx)
	sem := make(chan struct{}, poolFillers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		hold := m.pool.holdOff(time.Now())
		for _, id := range m.pool.surplus() {
			if ctr, err := m.cfg.Client.LoadContainer(ctx, id); err == nil {
				if err := m.destroy(ctx, ctr); err != nil && !errdefs.IsNotFound(err) {
					m.log.Warn("warm pool: destroy surplus member", "sandbox", id, "err", err)
				}
			}
		}
	fill:
		for hold == 0 && ctx.Err() == nil {
			select {
			case sem <- struct{}{}:
			default:
				break fill // all fillers busy; one signals when done
			}
			key, ok := m.pool.next(time.Now())
			if !ok {
				<-sem
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := m.addMember(ctx, key)
				m.pool.started(key, err)
				<-sem
				switch {
				case err == nil:
				case errdefs.IsResourceExhausted(err), errdefs.IsNotFound(err), ctx.Err() != nil:
					m.log.Debug("warm pool: not refilled", "image", key.image, "runtime", key.runtime, "err", err)
				default:
					m.log.Warn("warm pool: could not start a member", "image", key.image, "runtime", key.runtime, "err", err)
				}
				m.pool.signal()
			}()
		}
		next := time.Second
		if hold > 0 {
			next = hold
		}
		select {
		case <-ctx.Done():
			return
		case <-m.pool.wake:
		case <-time.After(next):
		}
	}
}

func (m *Manager) addMember(ctx context.Context, key poolKey) error {
	r, err := m.resolve(CreateRequest{Image: key.image, Runtime: key.runtime})
	if err != nil {
		return err
	}
	img, err := m.cfg.Images.Get(ctx, r.image)
	if err != nil {
		return err
	}
	imgSpec, err := m.specs.get(ctx, img)
	if err != nil {
		return err
	}
	if r, err = withImage(r, imgSpec.Config); err != nil {
		return err
	}
	sb, err := m.createResolved(ctx, time.Now(), r, img, imgSpec, true)
	if err != nil {
		return err
	}
	m.pool.put(keyOf(img.Name(), r.runtime), sb.ID, &memberInfo{pid: sb.InitPID, hostID: sb.hostUID, shimGroup: sb.shimGroup, imageDigest: img.Target().Digest.String(), runtime: sb.Runtime})
	return nil
}

// adoptLeftovers takes back the members a previous boxd left, up to each
// image's target; it destroys the rest, those whose init does not answer
// and those that were being handed out when that boxd stopped.
func (m *Manager) adoptLeftovers(ctx context.Context) {
	ctrs, err := m.cfg.Client.Containers(ctx, fmt.Sprintf(`labels."%s"`, LabelPool))
	if err != nil {
		m.log.Warn("warm pool: list leftovers", "err", err)
		return
	}
	kept := map[poolKey]int{}
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(ctx)
		// The pool label names the image; the record, the runtime.
		var rec record
		if err == nil {
			err = json.Unmarshal([]byte(labels[LabelSandbox]), &rec)
		}
		key := keyOf(labels[LabelPool], rec.Runtime)
		ok := err == nil && kept[key] < m.pool.wanted(key)
		if ok {
			_, serr := os.Stat(filepath.Join(m.sandboxDir(ctr.ID()), handedMarker))
			ok = errors.Is(serr, os.ErrNotExist)
		}
		if ok {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			ok = m.agent(ctr.ID()).Ping(pctx) == nil
			cancel()
		}
		if ok {
			kept[key]++
			m.pool.put(key, ctr.ID(), nil)
			continue
		}
		if err := m.destroy(ctx, ctr); err != nil && !errdefs.IsNotFound(err) {
			m.log.Warn("warm pool: destroy stale member", "sandbox", ctr.ID(), "err", err)
		}
	}
}

// DropPoolMembers destroys the idle members of image's pool once the image
// is removed: they are boxd's own and never ran code, so they neither
// block the removal (ImageUsers skips them) nor stay on an image that is
// gone. The pool's size stays; refills fail until the image is back.
func (m *Manager) DropPoolMembers(ctx context.Context, image string) {
	key, err := m.poolImage(image)
	if err != nil {
		return
	}
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	for _, id := range m.pool.takeAll(key) {
		ctr, err := m.cfg.Client.LoadContainer(ctx, id)
		if err == nil {
			err = m.destroy(ctx, ctr)
		}
		if err != nil && !errdefs.IsNotFound(err) {
			m.log.Warn("warm pool: destroy member of a removed image", "sandbox", id, "image", key, "err", err)
		}
	}
}

// PoolImageName is the name an image's pool is listed under.
func (m *Manager) PoolImageName(image string) (string, error) { return m.poolImage(image) }
