//go:build linux

// Room: resources. Callers, ownership and per-owner quotas.

package runtime

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// Ownership. Every sandbox records the host uid of the caller that created
// it (LabelOwner, set at create and on adoption of a warm-pool member, so a
// restarted boxd knows it from containerd). The API layer puts the caller
// into the context (WithCaller); the runtime checks it in the two places
// every sandbox-scoped call goes through to reach a sandbox: find (by id
// or name, through containerd) and agentFor's fast path (the inventory).
// A sandbox the caller may not use is reported exactly as one that does
// not exist, so ids and names of other users' sandboxes leak nothing.
//
// Names are per owner: two users may each have a sandbox named "ci".
// A name is looked up among the caller's own sandboxes; an admin's lookup
// falls back to every owner's and is refused if that is ambiguous.

// LabelOwner holds the creating caller's host uid, in decimal. A sandbox
// without it (made by a boxd before ownership) belongs to root.
const LabelOwner = "boxd.io/owner"

// Caller is who a call is made for, as the API layer learned it from the
// socket's peer credentials.
type Caller struct {
	UID uint32
	// Admin callers (root, --admin-group members) see and manage every
	// sandbox.
	Admin bool
	// Unchecked skips the ownership check. It exists only for the
	// benchmark's --bench-unchecked-socket (bench aid): the same build
	// measured with and without the check.
	Unchecked bool
	// GID and Groups are the caller's primary and supplementary groups
	// (SO_PEERCRED and SO_PEERGROUPS, or a token user's groups), checked
	// with UID when a create binds host directories. GIDKnown is false
	// when the API layer could not learn them.
	GID      uint32
	Groups   []uint32
	GIDKnown bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c. A context without a caller is boxd's
// own work (expiry, the warm pool, restarts), which reaches everything and
// creates sandboxes owned by root.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// mayUse is the ownership check: may ctx's caller reach a sandbox owned by
// owner?
func mayUse(ctx context.Context, owner uint32) bool {
	c, ok := CallerFrom(ctx)
	return !ok || c.Admin || c.Unchecked || c.UID == owner
}

// restricted reports the uid whose sandboxes alone ctx's caller may see,
// or false if it may see all.
func restricted(ctx context.Context) (uint32, bool) {
	c, ok := CallerFrom(ctx)
	if !ok || c.Admin || c.Unchecked {
		return 0, false
	}
	return c.UID, true
}

// ownerUID is the uid ctx's caller's new sandboxes belong to.
func ownerUID(ctx context.Context) uint32 {
	c, _ := CallerFrom(ctx)
	return c.UID
}

// ownerOf reads a sandbox's owner from its labels (root when unset).
func ownerOf(labels map[string]string) uint32 {
	v, err := strconv.ParseUint(labels[LabelOwner], 10, 32)
	if err != nil {
		return 0
	}
	return uint32(v)
}

// notFound is the one error for a sandbox that does not exist and for one
// the caller may not see: the same code and message shape.
func notFound(idOrName string) error {
	return fmt.Errorf("sandbox %q not found: %w", idOrName, errdefs.ErrNotFound)
}

// Quotas are per-uid limits on what a caller's sandboxes may hold; 0
// means no limit. uid 0 (root) is not limited.
type Quotas struct {
	MaxSandboxes int
	MaxMemory    int64
	// MaxDisk bounds the host disk one uid's sandboxes may hold: their
	// disk caps plus the fork layers under them (see owned).
	MaxDisk int64
}

// Quotas are the per-uid limits this Manager enforces.
func (m *Manager) Quotas() Quotas { return m.cfg.Quotas }

// owned is what the inventory keeps about a client-visible sandbox for
// ownership and quotas.
type owned struct {
	uid    uint32
	memory int64
	// disk is the sandbox's disk cap (0: none), and layers the fork layers
	// its writable layer sits on: committed snapshots on the host's
	// filesystem, outside any cap, that stay while any fork on them does.
	// A layer is counted once per owner however many forks share it.
	disk   int64
	layers []LayerCharge
	// layerOnly is a reservation of a new fork layer, not a sandbox.
	layerOnly bool
}

// LayerCharge is a fork layer and the host disk it is charged at.
type LayerCharge struct {
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"`
}

// ownedOf is what a sandbox made from r counts against its owner.
func ownedOf(r resolved) owned {
	return owned{uid: r.owner, memory: r.limits.MemoryBytes, disk: r.limits.DiskBytes, layers: r.forkLayers}
}

// held is what one uid holds, as the quotas count it.
type held struct {
	count  int
	memory int64
	disk   int64           // caps and layers
	layers map[string]bool // fork layers counted
}

func (u *held) add(o owned) {
	if !o.layerOnly {
		u.count++
		u.memory += o.memory
		u.disk += o.disk
	}
	for _, l := range o.layers {
		if u.layers == nil {
			u.layers = map[string]bool{}
		}
		if !u.layers[l.Key] {
			u.layers[l.Key] = true
			u.disk += l.Bytes
		}
	}
}

// quotaErr names the quota a create would exceed.
func quotaErr(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, errdefs.ErrResourceExhausted)...)
}

// check reports whether adding o to what uid already holds (held,
// pending creates included) stays within q.
func (q Quotas) check(o owned, h held) error {
	if o.uid == 0 {
		return nil
	}
	count, memory := h.count, h.memory
	if !o.layerOnly && q.MaxSandboxes > 0 && count+1 > q.MaxSandboxes {
		return quotaErr("uid %d already has %d sandboxes (counting any still being deleted), the per-user limit (max-sandboxes-per-user) is %d", o.uid, count, q.MaxSandboxes)
	}
	if !o.layerOnly && q.MaxMemory > 0 && memory+o.memory > q.MaxMemory {
		return quotaErr("uid %d's sandboxes would have %d bytes of memory with this one's %d, above the per-user limit (max-memory-per-user) of %d bytes", o.uid, memory+o.memory, o.memory, q.MaxMemory)
	}
	if q.MaxDisk <= 0 {
		return nil
	}
	if !o.layerOnly && o.disk == 0 {
		return quotaErr("uid %d's sandbox would have no disk cap, and the per-user disk limit (max-disk-per-user) of %d bytes counts caps: give it a disk cap (create --disk)", o.uid, q.MaxDisk)
	}
	before := h.disk
	h.layers = maps.Clone(h.layers)
	h.add(o)
	if h.disk > q.MaxDisk {
		what := "this sandbox's disk cap and the fork layers under it"
		if o.layerOnly {
			what = "the new fork layer"
			if len(o.layers) == 1 && strings.HasPrefix(o.layers[0].Key, "vol") {
				what = "the new volume or volume snapshot"
			}
		}
		return quotaErr("uid %d's sandboxes would hold %d bytes of disk with %s (%d without), counting disk caps and the fork layers they sit on; the per-user limit (max-disk-per-user) is %d bytes", o.uid, h.disk, what, before, q.MaxDisk)
	}
	return nil
}

// reserveQuota holds r's share of its owner's quotas until the returned
// release (by then the sandbox is counted as visible, or its create
// failed), so creates and forks racing each other cannot overshoot.
func (m *Manager) reserveQuota(r resolved) (release func(), _ error) {
	token := "quota:" + newID()
	if err := m.inv.reserveQuota(token, ownedOf(r), m.cfg.Quotas); err != nil {
		return nil, err
	}
	return func() { m.inv.releaseQuota(token) }, nil
}

// reserveLayers holds fork layers' disk against owner's quota until the
// returned release (by then the forks on them count them). A layer owner
// is charged already is not charged twice.
func (m *Manager) reserveLayers(owner uint32, ls []LayerCharge) (release func(), _ error) {
	token := "quota:" + newID()
	if err := m.inv.reserveQuota(token, owned{uid: owner, layers: ls, layerOnly: true}, m.cfg.Quotas); err != nil {
		return nil, err
	}
	return func() { m.inv.releaseQuota(token) }, nil
}
