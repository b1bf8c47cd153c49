//go:build linux

// Room: shared. This file holds the Manager, its constructor and the
// helpers every room uses: the busy keys, a sandbox's host directories,
// events, and find, which resolves an id or name for a caller.

// Package runtime is boxd's sandbox lifecycle on containerd: create, list,
// inspect, delete, expiry, and exec and file operations through the
// sandbox's init. containerd is the source of truth: every setting lives in
// container labels, so a restarted boxd finds every sandbox again.
package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/internal/keyedlock"
	"github.com/boxd-dev/boxd/network/ports"
)

// Label keys boxd writes on its containers.
const (
	LabelManaged   = "boxd.io/managed"
	LabelSandbox   = "boxd.io/sandbox" // JSON of record
	LabelName      = "boxd.io/name"
	LabelExpiresAt = "boxd.io/expires-at"
	LabelPool      = "boxd.io/pool" // warm pool member; value: its image
	// LabelDeleting marks a sandbox deleted in the background
	// (DeleteBackground): no client's any more, torn down by this boxd or,
	// after a restart, by the next.
	LabelDeleting   = "boxd.io/deleting"
	UserLabelPrefix = "boxd.user/"
)

// record is the part of a sandbox that is stored in its container label.
type record struct {
	Name  string `json:"name,omitempty"`
	Image string `json:"image"`
	// ImageDigest is what Image pointed at when the sandbox was made: a
	// forced replace can point the name elsewhere since.
	ImageDigest string    `json:"image_digest,omitempty"`
	Memory      int64     `json:"memory"`
	CPUs        float64   `json:"cpus"`
	Pids        int64     `json:"pids"`
	Workdir     string    `json:"workdir"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	HostUID     uint32    `json:"host_uid"`
	IDMapSize   uint32    `json:"idmap_size"`
	// Disk is the cap of the writable layer in bytes (its own filesystem
	// image); 0: none.
	Disk int64 `json:"disk,omitempty"`
	// Ports is only used while creating: the published ports live in
	// LabelPorts, which PublishPort changes.
	Ports []PortSpec `json:"-"`
	// The runtime the sandbox was made on (Config.Runc's version); a later
	// boxd may run on another.
	Runtime           string   `json:"runtime,omitempty"`
	RuntimeVersion    string   `json:"runtime_version,omitempty"`
	RuntimeAdvisories []string `json:"runtime_advisories,omitempty"`
	// User is the default user of commands (create --user or the image's
	// USER); empty is root.
	User string `json:"user,omitempty"`
	// ShimGroup names the runc shim the sandbox shares (shimgroups.go);
	// empty: its own.
	ShimGroup string `json:"shim_group,omitempty"`
	// Volumes are the named volumes the sandbox mounts (volumes.go).
	Volumes []volumeMount `json:"volumes,omitempty"`
	// Binds are the host directories the sandbox mounts, and BindCreds
	// who they were checked for (binds.go).
	Binds     []bindMount `json:"binds,omitempty"`
	BindCreds *bindCreds  `json:"bind_creds,omitempty"`
	Tunables
}

// Manager runs sandboxes. It is safe for concurrent use. Its methods live
// in one file per room (each file's first comment names its room; see
// docs/architecture.md); its fields are grouped here by the room that owns
// them.
type Manager struct {
	// Shared by every room.
	cfg Config
	log *slog.Logger
	// busy holds the ids (and "name:OWNER:NAME" keys) being created,
	// changed or destroyed: one holder at a time, and the background
	// reconciler leaves a held sandbox alone (a container without a task
	// is normal then, not a dead sandbox).
	busy keyedlock.Set

	// Create. specs caches image configs by the image's target digest
	// (content addressed, so never stale): reading one is a manifest and a
	// config read through containerd's content service, several round
	// trips each create of a burst would otherwise pay.
	specs imageSpecCache

	// Reconcile: what exists and what clients may reach (inventory.go),
	// and each sandbox's last activity for the idle policy (idle.go).
	inv *inventory
	act activity
	// bgDeletes: ids a background delete is tearing down now, and when
	// each last ended unfinished (reconcile retries those, delete.go).
	bgDeletes, bgDeleteFailed sync.Map

	// Pools: the warm pools' members and targets.
	pool pool
	// counters since start, for the metrics endpoint (Counts).
	counters counters
	// lastSnapshotSweep: the reconcile pass's last sweepOrphanSnapshots.
	lastSnapshotSweep time.Time

	// Network: the published ports' listeners.
	ports *ports.Publisher

	// Resources: uid blocks, shared shims, the daemon-wide cgroup totals
	// (set by Load), the freezer, block I/O accounting, and each
	// sandbox's cgroup OOM counter file, held open.
	ids      *idRanges
	shims    *shimGroups
	totals   totals
	freezer  freezer
	blkio    blkio
	oomFiles openFiles

	// Lifecycle: paused mirrors the kernel's freezer state of each
	// sandbox for the exec hot path (refreshed on every reconcile).
	pausedMu sync.Mutex
	paused   map[string]bool

	// Sandbox I/O: execDefs caches each sandbox's default exec timeout and
	// output cap (Tunables with only those set), keyed by id; agentLinks
	// holds each sandbox's agentLink (exec.go): its kept connections to the
	// init and the client that uses them.
	execDefs   sync.Map
	agentLinks sync.Map
	// cmdcg: the per-command cgroups (cmdgroups.go).
	cmdcg cmdGroups

	// Volumes: the named volumes and who mounts them (volumes.go).
	vols *volumes

	// Interp: each sandbox's code interpreter driver (interp.go).
	interps sync.Map
	// Checkpoint: bytes promised to checkpoints being written, and the
	// HMAC key (checkpoint_store.go).
	ckpt checkpoints
}

// claim marks id busy; it reports false if something else holds it.
func (m *Manager) claim(id string) bool { return m.busy.TryLock(id) }

// claimWait claims id, waiting up to d for another holder to let go.
func (m *Manager) claimWait(ctx context.Context, id string, d time.Duration) bool {
	return m.busy.Lock(ctx, id, d)
}

// awaitRelease waits up to d for whatever holds id (a create, a delete or a
// restart of a dead init) to finish, so a caller that reaches the sandbox
// then sees its outcome rather than a half-made state.
func (m *Manager) awaitRelease(ctx context.Context, id string, d time.Duration) {
	m.busy.Wait(ctx, id, d)
}

// release lets go of id and wakes whoever waits for it.
func (m *Manager) release(id string) { m.busy.Unlock(id) }

// NewManager checks cfg and prepares the state directory.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Client == nil || cfg.Images == nil {
		return nil, errors.New("runtime: client and image store are required")
	}
	if !filepath.IsAbs(cfg.StateDir) || !filepath.IsAbs(cfg.InitBinary) {
		return nil, fmt.Errorf("runtime: state dir %q and init binary %q must be absolute", cfg.StateDir, cfg.InitBinary)
	}
	if st, err := os.Stat(cfg.InitBinary); err != nil || st.IsDir() {
		return nil, fmt.Errorf("runtime: init binary %s: not a file (%v)", cfg.InitBinary, err)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "boxd"
	}
	if cfg.Runtime == "" {
		cfg.Runtime = "io.containerd.runc.v2"
	}
	if cfg.DefaultLimits.MemoryBytes == 0 {
		cfg.DefaultLimits.MemoryBytes = 512 << 20
	}
	if cfg.DefaultLimits.CPUs == 0 {
		cfg.DefaultLimits.CPUs = 1
	}
	if cfg.DefaultLimits.Pids == 0 {
		cfg.DefaultLimits.Pids = 256
	}
	if cfg.DefaultTTL == 0 {
		cfg.DefaultTTL = time.Hour
	}
	if cfg.MaxCPUs == 0 {
		cfg.MaxCPUs = 1024
	}
	if cfg.IDMapSize == 0 {
		cfg.IDBase, cfg.IDMapSize = 200000, 65536
	}
	if cfg.IDRanges == 0 {
		cfg.IDRanges = DefaultIDRanges
	}
	if cfg.ShimGroupSize == 0 {
		cfg.ShimGroupSize = DefaultShimGroupSize
	}
	if cfg.ShimGroupSize < 1 || cfg.ShimGroupSize > MaxShimGroupSize {
		return nil, fmt.Errorf("runtime: shim group size %d: want 1 to %d", cfg.ShimGroupSize, MaxShimGroupSize)
	}
	if cfg.IDBase == 0 || uint64(cfg.IDBase)+uint64(cfg.IDRanges)*uint64(cfg.IDMapSize) > 1<<32-1 {
		return nil, fmt.Errorf("runtime: %d uid ranges of %d from %d do not fit in the uid space above 0", cfg.IDRanges, cfg.IDMapSize, cfg.IDBase)
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 15 * time.Second
	}
	if cfg.Restarts.Window == 0 {
		cfg.Restarts = DefaultRestartPolicy
	}
	if cfg.Restarts.Backoff == 0 {
		cfg.Restarts.Backoff = DefaultRestartPolicy.Backoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "sandboxes"), 0o700); err != nil {
		return nil, fmt.Errorf("runtime: state dir: %w", err)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, pool: pool{wake: make(chan struct{}, 1)}, inv: newInventory(cfg.MaxSandboxes),
		ids:   newIDRanges(cfg.IDBase, cfg.IDMapSize, cfg.IDRanges),
		shims: newShimGroups(cfg.ShimGroupSize),
		ports: &ports.Publisher{Log: cfg.Logger},
		vols:  newVolumes(cfg.StateDir)}
	m.watchDenials()
	return m, nil
}

func (m *Manager) sandboxDir(id string) string { return filepath.Join(m.cfg.StateDir, "sandboxes", id) }

// A sandbox's host directory is host root's, 0700, and never mounted
// into the sandbox. It holds the agent socket, which boxd creates and
// dials (its listener is the init's once handed off), the init's log, and
// the hand-off directory: host root's too, 0711, mounted read-only at
// wire.ChannelDir, where boxd listens while an init starts.
func (m *Manager) handoffDir(id string) string { return filepath.Join(m.sandboxDir(id), "handoff") }
func (m *Manager) socketPath(id string) string {
	return filepath.Join(m.sandboxDir(id), wire.SocketName)
}

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// emit records an event about a client-visible sandbox, as its owner's
// (the inventory knows it; a sandbox it does not know is root's, so only
// admins see the event).
func (m *Manager) emit(typ, id string, attrs map[string]string) {
	uid, _ := m.inv.ownerOf(id)
	m.cfg.Events.Emit(typ, id, uid, attrs)
}

// execStarted records that a command started in id; its arguments only
// with --events-argv.
func (m *Manager) execStarted(id string, args []string) {
	var attrs map[string]string
	if m.cfg.EventsArgv {
		attrs = map[string]string{"args": truncate(strings.Join(args, " "), 256)}
	}
	m.emit(events.ExecStarted, id, attrs)
}

func (m *Manager) removeSnapshot(ctx context.Context, key string) {
	sn := m.cfg.Client.SnapshotService(m.cfg.Images.Snapshotter())
	if err := sn.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
		m.log.Error("cleanup: remove snapshot", "key", key, "err", err)
	}
}

// find resolves an id or a name to a container the caller may use (see
// owner.go): another user's sandbox is not found, exactly like a missing
// one.
func (m *Manager) find(ctx context.Context, idOrName string) (client.Container, error) {
	if idOrName == "" {
		return nil, fieldErr("id", "sandbox id is empty")
	}
	if len(idOrName) > 128 {
		return nil, fieldErr("id", "sandbox id is longer than 128 characters")
	}
	ctr, err := m.cfg.Client.LoadContainer(ctx, idOrName)
	if err == nil {
		labels, lerr := ctr.Labels(ctx)
		if lerr == nil && labels[LabelManaged] == "true" && mayUse(ctx, ownerOf(labels)) {
			return ctr, nil
		}
	} else if !errdefs.IsNotFound(err) && !errdefs.IsInvalidArgument(err) {
		return nil, fmt.Errorf("load sandbox %s: %w", idOrName, err)
	}
	filter := fmt.Sprintf(`labels."%s"==true,labels."%s"==%s`, LabelManaged, LabelName, strconv.Quote(idOrName))
	if uid, ok := restricted(ctx); ok {
		filter += fmt.Sprintf(`,labels."%s"==%s`, LabelOwner, strconv.Quote(strconv.FormatUint(uint64(uid), 10)))
	}
	ctrs, err := m.cfg.Client.Containers(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("find sandbox %s: %w", idOrName, err)
	}
	switch len(ctrs) {
	case 0:
		return nil, notFound(idOrName)
	case 1:
		return ctrs[0], nil
	}
	// Names are per owner: an admin (or boxd itself) may see several
	// sandboxes of one name. Its own comes first; among others' it must
	// say which by id.
	var owners []string
	caller, hasCaller := CallerFrom(ctx)
	for _, c := range ctrs {
		labels, err := c.Labels(ctx)
		if err != nil {
			continue
		}
		if hasCaller && ownerOf(labels) == caller.UID {
			return c, nil
		}
		owners = append(owners, strconv.FormatUint(uint64(ownerOf(labels)), 10))
	}
	return nil, fieldErr("id", "name %q is used by sandboxes of several users (uids %s): name the sandbox by its id", idOrName, strings.Join(owners, ", "))
}
