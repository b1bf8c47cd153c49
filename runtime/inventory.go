//go:build linux

// Room: reconcile. The in-memory inventory of sandboxes (what clients
// may reach, what --max-sandboxes counts) and Load, which applies the
// cgroup totals and rebuilds it from containerd when boxd starts.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
)

// inventory is boxd's in-memory view of its sandboxes, kept so the hot
// paths need no containerd round trip: which ids clients may reach
// (visible: created or handed out from the pool, not being deleted) and
// which exist at all (all: warm-pool members included), which is what
// --max-sandboxes counts. containerd stays the source of truth: Load
// rebuilds the view from container labels at start-up, and create,
// adoption and delete keep it current.
type inventory struct {
	mu      sync.Mutex
	visible map[string]owned     // with each one's owner and memory
	all     map[string]time.Time // when each was counted
	max     int                  // 0: no limit
	// pending are the per-user quota shares of creates under way, so
	// creates racing each other cannot overshoot a quota either.
	pending map[string]owned
	// leaving are sandboxes being deleted: no client's any more, but their
	// processes and memory are there until the teardown ends, so they
	// still count against their owner's quota (a loop of runs that each
	// delete in the background cannot pile up more than the quota).
	leaving map[string]owned
}

func newInventory(max int) *inventory {
	return &inventory{visible: map[string]owned{}, all: map[string]time.Time{}, max: max, pending: map[string]owned{}, leaving: map[string]owned{}}
}

// isVisible reports whether id is a sandbox clients may reach. An id it
// does not know may still be one (created by another boxd on the same
// namespace, say): callers then ask containerd, which checks the label.
func (v *inventory) isVisible(id string) bool {
	_, ok := v.visibleOwner(id)
	return ok
}

// visibleOwner returns the owner of a client-visible sandbox.
func (v *inventory) visibleOwner(id string) (uint32, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	o, ok := v.visible[id]
	return o.uid, ok
}

// ownerOf returns the owner of a sandbox clients see or one being deleted.
func (v *inventory) ownerOf(id string) (uint32, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if o, ok := v.visible[id]; ok {
		return o.uid, true
	}
	o, ok := v.leaving[id]
	return o.uid, ok
}

// reserveQuota takes o's share of its owner's quota under token until
// settle or release; it fails naming the quota that would be exceeded.
func (v *inventory) reserveQuota(token string, o owned, q Quotas) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var h held
	for _, m := range []map[string]owned{v.visible, v.pending, v.leaving} {
		for _, x := range m {
			if x.uid == o.uid {
				h.add(x)
			}
		}
	}
	if err := q.check(o, h); err != nil {
		return err
	}
	v.pending[token] = o
	return nil
}

// releaseQuota drops a reservation (the create is done or failed; a
// successful one is counted by show from then on).
func (v *inventory) releaseQuota(token string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.pending, token)
}

// reserve counts id against the limit before anything of it is made, so
// creates racing each other cannot overshoot.
func (v *inventory) reserve(id string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.all[id]; ok {
		return nil
	}
	if v.max > 0 && len(v.all) >= v.max {
		return v.fullErr()
	}
	v.all[id] = time.Now()
	return nil
}

// swap gives victim's slot to id in one step, so no other create can take
// the slot between victim's removal and id's reservation. It reports false
// if victim was not counted.
func (v *inventory) swap(victim, id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.all[victim]; !ok {
		return false
	}
	delete(v.all, victim)
	delete(v.visible, victim)
	v.all[id] = time.Now()
	return true
}

// memberWait bounds how long a create at max-sandboxes waits for a
// warm-pool member being started, to take its slot.
const memberWait = 10 * time.Second

func (v *inventory) fullErr() error {
	return fmt.Errorf("the daemon's limit of %d sandboxes (max-sandboxes) is reached, warm-pool members included: %w", v.max, errdefs.ErrResourceExhausted)
}

// show makes a counted sandbox reachable by clients (owned by root).
func (v *inventory) show(id string) { v.showOwned(id, owned{}) }

// showOwned makes a counted sandbox reachable by clients, as o's.
func (v *inventory) showOwned(id string, o owned) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.countLocked(id)
	v.visible[id] = o
}

// add counts id without checking the limit (one found in containerd).
func (v *inventory) add(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.countLocked(id)
}

// countLocked counts id from now on, unless it is counted already.
func (v *inventory) countLocked(id string) {
	if _, ok := v.all[id]; !ok {
		v.all[id] = time.Now()
	}
}

// prune forgets the ids counted before listedAt that a listing made then
// did not find and nothing is creating or deleting (busy): containers
// removed behind boxd's back (ctr rm), which would otherwise hold a slot
// under max-sandboxes until boxd restarts. It returns what it forgot.
func (v *inventory) prune(present map[string]bool, listedAt time.Time, busy func(string) bool) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var gone []string
	for id, t := range v.all {
		if !present[id] && t.Before(listedAt) && !busy(id) {
			delete(v.all, id)
			delete(v.visible, id)
			delete(v.leaving, id)
			gone = append(gone, id)
		}
	}
	return gone
}

// hide makes id unreachable through the fast path (it is being deleted).
func (v *inventory) hide(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if o, ok := v.visible[id]; ok {
		v.leaving[id] = o
		delete(v.visible, id)
	}
}

// addLeaving counts id, found marked for deletion, against o's quota
// until it is forgotten.
func (v *inventory) addLeaving(id string, o owned) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.countLocked(id)
	v.leaving[id] = o
}

// forget drops id: it no longer exists (or its create failed).
func (v *inventory) forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.visible, id)
	delete(v.all, id)
	delete(v.leaving, id)
}

// known reports whether id is counted: made and not yet deleted.
func (v *inventory) known(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.all[id]
	return ok
}

func (v *inventory) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.all)
}

// Load prepares the Manager for serving: it applies the daemon-wide cgroup
// totals and rebuilds the inventory from containerd's labels. Call it once
// at start-up, before the API serves and before RunPool and Run.
func (m *Manager) Load(ctx context.Context) error {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	if err := m.applyTotals(); err != nil {
		return err
	}
	recs, err := m.cfg.Client.ContainerService().List(ctx, fmt.Sprintf(`labels."%s"==true`, LabelManaged), fmt.Sprintf(`labels."%s"`, LabelPool), fmt.Sprintf(`labels."%s"`, LabelDeleting))
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	m.loadVolumes(recs)
	m.pruneBinds(recs)
	m.removeOrphanStateDirs(recs)
	m.removeForkTemps(ctx)
	var visible []string
	for _, r := range recs {
		switch {
		case r.Labels[LabelManaged] == "true":
			m.inv.showOwned(r.ID, m.ownedOfContainer(ctx, r))
			visible = append(visible, r.ID)
		case r.Labels[LabelDeleting] != "":
			// A background delete the previous boxd did not finish.
			m.inv.addLeaving(r.ID, m.ownedOfContainer(ctx, r))
			go m.finishDeleteOnce(ctx, r.ID, 0)
		default:
			m.inv.add(r.ID)
		}
	}
	// A sandbox paused before boxd went down stays paused (the kernel
	// kept it frozen); calls must see that from the first one.
	m.refreshPaused(ctx, visible)
	// nftables keeps boxd's rules across a boxd restart but not a reboot,
	// and the resolver's view is in memory: re-derive both from the labels.
	if err := m.restoreNetworks(ctx); err != nil {
		m.log.Error("network: restore", "err", err)
	}
	if n := m.inv.count(); m.cfg.MaxSandboxes > 0 && n > m.cfg.MaxSandboxes {
		m.log.Warn("more sandboxes exist than max-sandboxes allows; creates are refused until some are deleted", "sandboxes", n, "max_sandboxes", m.cfg.MaxSandboxes)
	}
	// Published ports listen again before the API serves.
	m.relistenAll(ctx)
	return nil
}

// pruneInventory drops from the inventory the sandboxes containerd no
// longer has (see inventory.prune). A failed listing changes nothing.
func (m *Manager) pruneInventory(ctx context.Context) {
	listedAt := time.Now()
	recs, err := m.cfg.Client.ContainerService().List(ctx, fmt.Sprintf(`labels."%s"==true`, LabelManaged), fmt.Sprintf(`labels."%s"`, LabelPool), fmt.Sprintf(`labels."%s"`, LabelDeleting))
	if err != nil {
		return
	}
	present := make(map[string]bool, len(recs))
	for _, r := range recs {
		present[r.ID] = true
	}
	for _, id := range m.inv.prune(present, listedAt, m.busy.Held) {
		m.log.Warn("sandbox removed behind boxd's back; no longer counted", "sandbox", id)
		m.releaseVolumes(id) // nor does it hold its volumes
		m.unmountBinds(id)
	}
}

// reserve counts a new sandbox id against max-sandboxes. A client's create
// at the limit takes the slot of an idle warm-pool member, which is
// destroyed first (waiting up to memberWait for one being started): the
// pool is a cache and must not turn clients away.
func (m *Manager) reserve(ctx context.Context, id string, member bool) error {
	deadline := time.Now().Add(memberWait)
	for {
		err := m.inv.reserve(id)
		if err == nil || member {
			return err
		}
		victim, ok := m.pool.takeAny()
		if !ok {
			if m.pool.isStarting() && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			return err
		}
		if !m.inv.swap(victim, id) {
			continue
		}
		m.log.Info("max-sandboxes reached: destroying an idle warm-pool member to make room", "member", victim, "sandbox", id)
		ctr, lerr := m.cfg.Client.LoadContainer(ctx, victim)
		if lerr == nil {
			lerr = m.destroy(context.WithoutCancel(ctx), ctr)
		}
		if lerr != nil && !errdefs.IsNotFound(lerr) {
			m.log.Warn("destroy pool member", "member", victim, "err", lerr)
		}
		return nil
	}
}

// AddVisibleForTest makes id a client-visible sandbox without containerd,
// for tests of the API layer that run an init by hand in a temp dir.
func (m *Manager) AddVisibleForTest(id string) { m.inv.show(id) }

// AddOwnedForTest is AddVisibleForTest for a sandbox owned by uid.
func (m *Manager) AddOwnedForTest(id string, uid uint32) { m.inv.showOwned(id, owned{uid: uid}) }

// ownedFrom reads the owner, memory limit and disk cap of a sandbox from
// its labels.
func ownedFrom(labels map[string]string) owned {
	o := owned{uid: ownerOf(labels)}
	var rec record
	if json.Unmarshal([]byte(labels[LabelSandbox]), &rec) == nil {
		o.memory, o.disk = rec.Memory, rec.Disk
	}
	return o
}

// ownedOfContainer is ownedFrom with, under max-disk-per-user, the fork
// layers the sandbox sits on read back from the snapshotter (the labels
// cannot hold them: containerd bounds a label at 4 KiB, a chain of forks
// has no such bound).
func (m *Manager) ownedOfContainer(ctx context.Context, c containers.Container) owned {
	o := ownedFrom(c.Labels)
	if m.cfg.Quotas.MaxDisk <= 0 || c.SnapshotKey == "" {
		return o
	}
	sn := m.cfg.Client.SnapshotService(c.Snapshotter)
	ls, err := rootfsLayers(ctx, sn, c.SnapshotKey)
	if err == nil {
		o.layers, err = layerCharges(ctx, sn, ls)
	}
	if err != nil {
		m.log.Warn("max-disk-per-user: the sandbox's fork layers are not counted", "sandbox", c.ID, "err", err)
	}
	return o
}

// forkTempPrefix names the snapshot a fork copies its source's layer into
// before committing it (forkLayer).
const forkTempPrefix = "boxd-fork-tmp-"

// removeForkTemps removes the snapshots of forks a previous boxd was
// killed in the middle of: at start no fork runs, so each is left over,
// and nothing else would ever remove it.
func (m *Manager) removeForkTemps(ctx context.Context) {
	sn := m.cfg.Client.SnapshotService(m.cfg.Images.Snapshotter())
	var keys []string
	_ = sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive && strings.HasPrefix(info.Name, forkTempPrefix) {
			keys = append(keys, info.Name)
		}
		return nil
	})
	for _, k := range keys {
		if err := sn.Remove(ctx, k); err != nil && !errdefs.IsNotFound(err) {
			m.log.Warn("fork leftover snapshot", "key", k, "err", err)
		}
	}
}
