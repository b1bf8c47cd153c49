//go:build linux

// Room: pools. The warm pools as the API sees them (sizes, status) and
// their upkeep: RunPool fills them, leftovers are taken back at start.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

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

// LabelPoolNetwork marks a member started in a network namespace of
// boxd's own, made ready for egress but not attached (value:
// network.ModeEgress); its hand-out attaches it.
const LabelPoolNetwork = "boxd.io/pool-network"

// MaxPoolSize bounds one image's pool.
const MaxPoolSize = 1000

// PoolSize is one image's warm-pool target on one runtime.
type PoolSize struct {
	Image   string
	Runtime string // RuntimeRunc or RuntimeGvisor; "" is runc
	Network string // "" (none) or network.ModeEgress (runc only)
	Size    int
}

// PoolStatus is one image's pool on one runtime as it stands.
type PoolStatus struct {
	Image    string // normalized name
	Runtime  string // RuntimeRunc or RuntimeGvisor
	Network  string // "": members for network none; network.ModeEgress
	Size     int    // target
	Ready    int    // started, idle members
	Starting int    // members being started
	// Creates of the pool's image, runtime and network since boxd
	// started: served by a member; made cold because none was ready;
	// made cold because they asked for what a member cannot take on
	// (docs/pool.md), --cold, volumes and binds included.
	HandedOut, ColdEmpty, ColdUnfit uint64
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
		if ps.Network == network.ModeEgress && rt != RuntimeRunc {
			m.log.Error("warm pool: egress members run on runc only", "image", ps.Image, "runtime", rt)
			continue
		}
		m.pool.setWant(keyOf(name, rt).withNetwork(ps.Network), ps.Size)
	}
	m.adoptLeftovers(ctx)
	sem := make(chan struct{}, poolFillers)
	var wg sync.WaitGroup
	defer wg.Wait()
	lastSweep := time.Now()
	for {
		if time.Since(lastSweep) > strayMemberAge/2 {
			m.sweepStrayMembers(ctx)
			lastSweep = time.Now()
		}
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
	r, err := m.resolve(CreateRequest{Image: key.image, Runtime: key.runtime, Network: key.network})
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
	m.pool.put(keyOf(img.Name(), r.runtime).withNetwork(key.network), sb.ID, &memberInfo{pid: sb.InitPID, hostID: sb.hostUID, shimGroup: sb.shimGroup, imageDigest: img.Target().Digest.String(), runtime: sb.Runtime})
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
		key := keyOf(labels[LabelPool], rec.Runtime).withNetwork(labels[LabelPoolNetwork])
		// A member's disk cap (its ext4 image) and uid block size are
		// fixed when it starts, and its hand-out records this boxd's:
		// one started under other defaults would not be what a cold
		// create makes now.
		ok := err == nil && kept[key] < m.pool.wanted(key) &&
			rec.Disk == m.cfg.DefaultLimits.DiskBytes && rec.IDMapSize == m.cfg.IDMapSize
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

// strayMemberAge is how old a pool-labelled container the pool does not
// hold must be before sweepStrayMembers destroys it. A start holds its
// claim until just before the member joins the pool; the age only covers
// that moment.
const strayMemberAge = 10 * time.Second

// sweepStrayMembers destroys pool-labelled containers that are not ready
// members: a member whose start failed and whose rollback failed too (as
// when containerd died during the start) would otherwise keep its
// container, snapshot and cgroups, uncounted, until boxd restarts. A
// member being started or handed out is claimed, or younger than
// strayMemberAge, or no longer pool-labelled once handed out.
func (m *Manager) sweepStrayMembers(ctx context.Context) {
	ctrs, err := m.cfg.Client.Containers(ctx, fmt.Sprintf(`labels."%s"`, LabelPool))
	if err != nil {
		return
	}
	for _, ctr := range ctrs {
		id := ctr.ID()
		info, err := ctr.Info(ctx)
		if err != nil || m.pool.isReady(id) || time.Since(info.CreatedAt) < strayMemberAge {
			continue
		}
		if _, err := os.Stat(filepath.Join(m.sandboxDir(id), handedMarker)); err == nil {
			continue // an adoption in progress; a restart sorts out a dead one
		}
		if !m.claim(id) {
			continue
		}
		// Read again under the claim: a hand-out rewrites the labels.
		labels, err := ctr.Labels(ctx)
		stray := err == nil && labels[LabelPool] != "" && !m.pool.isReady(id)
		m.release(id)
		if !stray {
			continue
		}
		m.log.Warn("warm pool: destroying a member the pool does not hold", "sandbox", id)
		if err := m.destroy(ctx, ctr); err != nil && !errdefs.IsNotFound(err) {
			m.log.Warn("warm pool: destroy stray member", "sandbox", id, "err", err)
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
