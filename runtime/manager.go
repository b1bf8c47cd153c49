//go:build linux

// Package runtime is boxd's sandbox lifecycle on containerd: create, list,
// inspect, delete, expiry, and exec and file operations through the
// sandbox's init. containerd is the source of truth: every setting lives in
// container labels, so a restarted boxd finds every sandbox again.
package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/agent/handoff"
	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/internal/gvisor"
	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/network/ports"
	"github.com/boxd-dev/boxd/oci"
	"github.com/boxd-dev/boxd/snapshot"
)

// Label keys boxd writes on its containers.
// DefaultIDRanges is how many uid blocks boxd hands out by default: 1024
// blocks of 65536 from 200000 end below uid 67,308,864.
const DefaultIDRanges = 1024

// DefaultShimGroupSize is how many sandboxes share a runc shim unless
// configured: eight cuts the shim's share of an idle sandbox's memory
// from about 4.5 MiB to under 1, while a shim that dies (it never has in
// boxd's tests; it runs no sandbox code) takes the processes of eight
// sandboxes, not one, with it; their files stay and their inits restart.
// MaxShimGroupSize bounds one shim's fan-out.
const (
	DefaultShimGroupSize = 8
	MaxShimGroupSize     = 64
)

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

// Config is the daemon-wide configuration of a Manager.
type Config struct {
	Client     *client.Client
	Images     *snapshot.Store
	StateDir   string // host directory for per-sandbox agent sockets, hand-off dirs and init logs
	InitBinary string // host path of the static boxd-init binary
	Runtime    string // containerd runtime, default io.containerd.runc.v2
	// Namespace is the containerd namespace the client defaults to; the
	// spec generator reads it from the context.
	Namespace string
	// Runc is the runc binary the shim runs; empty means the shim's PATH.
	Runc string
	// RuntimeVersion is Runc's version and RuntimeAdvisories the known
	// container escapes it has (non-empty only if boxd was told to run on
	// it anyway); both are recorded in each sandbox made.
	RuntimeVersion    string
	RuntimeAdvisories []string
	// Gvisor is gVisor's runsc and shim if installed (nil: not; GvisorErr
	// says why), and DefaultRuntime the runtime of a create that names
	// none ("" is runc).
	Gvisor         *Gvisor
	GvisorErr      string
	DefaultRuntime string

	DefaultImage  string
	DefaultLimits Limits
	DefaultTTL    time.Duration
	MaxMemory     int64
	MaxCPUs       int

	// Each sandbox gets its own block of IDMapSize host uids and gids (a
	// user namespace; unprivileged on the host): root in it maps to the
	// block's first id. Blocks are taken from IDRanges consecutive blocks
	// starting at IDBase.
	IDBase, IDMapSize uint32
	IDRanges          int

	// ShimGroupSize is how many sandboxes share one runc shim process
	// (shimgroups.go); 1 gives each its own, 0 means DefaultShimGroupSize.
	ShimGroupSize int

	// Pools are the warm pools' sizes at start (RunPool): idle sandboxes
	// of each image kept started for fast creates. An empty Image is the
	// default image. SetPoolSize changes them while boxd runs.
	Pools []PoolSize

	// Daemon-wide totals; 0 means no limit. MaxSandboxes counts every
	// sandbox, warm-pool members included. TotalMemory and TotalPids are
	// set on the parent cgroup all sandboxes sit under (Load).
	MaxSandboxes int
	TotalMemory  int64
	TotalPids    int64
	// Quotas are per caller uid (owner.go).
	Quotas Quotas

	// ReadyTimeout bounds how long create waits for the init to answer.
	ReadyTimeout time.Duration
	// Restarts bounds how often a sandbox's dead init is replaced; the
	// zero value means DefaultRestartPolicy.
	Restarts RestartPolicy
	// Network sets up egress sandboxes; nil means boxd cannot offer egress
	// and NetworkErr says why.
	Network    *network.Manager
	NetworkErr string
	// Ports says which host addresses ports may be published on (loopback
	// always; others only as listed).
	Ports ports.Policy
	// Events records what happens to sandboxes; nil records nothing.
	Events *events.Log
	// EventsArgv records a command's arguments in its exec_started event
	// (--events-argv). Off, the event says only that a command started:
	// arguments often carry secrets (sh -c 'export TOKEN=...').
	EventsArgv bool
	// IdleTimeout and OnIdle are the idle policy of a create that names
	// none: 0 never expires on idleness.
	IdleTimeout time.Duration
	OnIdle      string
	Logger      *slog.Logger
}

// Sandbox is what boxd reports about a sandbox.
type Sandbox struct {
	ID        string
	Name      string
	Image     string
	State     string // running, stopped, unknown
	Limits    Limits
	Env       []string
	Workdir   string
	Labels    map[string]string
	CreatedAt time.Time
	ExpiresAt time.Time
	InitPID   uint32
	UIDMap    string
	OwnerUID  uint32     // the host uid that created it
	Ports     []PortSpec // published ports, as recorded
	Usage     *Usage     // set by Get while the sandbox runs
	Restarts  RestartInfo
	Network   *NetworkInfo
	// PausedAt and PauseReason are set while the sandbox is paused.
	PausedAt    time.Time
	PauseReason string
	Idle        *IdleInfo // nil: no idle timeout
	User        string    // default user of commands; empty: root
	Tunables    Tunables
	StoppedAt   time.Time // set while stopped by Stop
	// DiskUsedBytes is what the writable layer of a capped sandbox uses
	// (Get only); the cap is Limits.DiskBytes.
	DiskUsedBytes int64
	Runtime       RuntimeInfo

	hostUID uint32 // first host id of its uid block (the pool keeps it)
	// shimGroup is the shim it shares (the pool keeps it too).
	shimGroup string
}

// RuntimeInfo is the OCI runtime a sandbox was made on.
type RuntimeInfo struct {
	Name, Version string
	Advisories    []string // known container escapes of that version (CVE ids)
}

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
	Tunables
}

// Manager runs sandboxes. It is safe for concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	// specs caches image configs by the image's target digest (content
	// addressed, so never stale): reading one is a manifest and a config
	// read through containerd's content service, several round trips each
	// create of a burst would otherwise pay.
	specs imageSpecCache

	pool   pool
	inv    *inventory
	ids    *idRanges
	shims  *shimGroups
	ports  *ports.Publisher
	totals totals // set by Load

	// busy holds the ids being created or destroyed, which the background
	// reconciler must leave alone (a container without a task is normal
	// then, not a dead sandbox).
	busyMu sync.Mutex
	busy   map[string]bool

	// freezer pauses sandboxes; paused mirrors the kernel's freezer state
	// of each sandbox for the exec hot path (refreshed on every reconcile).
	freezer  freezer
	pausedMu sync.Mutex
	paused   map[string]bool
	act      activity
	blkio    blkio
	// execDefs caches each sandbox's default exec timeout and output cap
	// (Tunables with only those set), keyed by id.
	execDefs sync.Map
	// oomFiles holds each sandbox's cgroup OOM counter file open.
	oomFiles openFiles
	// agentLinks holds each sandbox's agentLink (exec.go): its kept
	// connections to the init and the client that uses them.
	agentLinks sync.Map
}

// claim marks id busy; it reports false if something else holds it.
func (m *Manager) claim(id string) bool {
	m.busyMu.Lock()
	defer m.busyMu.Unlock()
	if m.busy[id] {
		return false
	}
	if m.busy == nil {
		m.busy = map[string]bool{}
	}
	m.busy[id] = true
	return true
}

// claimWait claims id, waiting up to d for another holder to let go.
func (m *Manager) claimWait(ctx context.Context, id string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !m.claim(id) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// awaitRelease waits up to d for whatever holds id (a create, a delete or a
// restart of a dead init) to finish, so a caller that reaches the sandbox
// then sees its outcome rather than a half-made state.
func (m *Manager) awaitRelease(ctx context.Context, id string, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		m.busyMu.Lock()
		held := m.busy[id]
		m.busyMu.Unlock()
		if !held || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (m *Manager) release(id string) {
	m.busyMu.Lock()
	defer m.busyMu.Unlock()
	delete(m.busy, id)
}

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
	return &Manager{cfg: cfg, log: cfg.Logger, pool: pool{wake: make(chan struct{}, 1)}, inv: newInventory(cfg.MaxSandboxes),
		ids:   newIDRanges(cfg.IDBase, cfg.IDMapSize, cfg.IDRanges),
		shims: newShimGroups(cfg.ShimGroupSize),
		ports: &ports.Publisher{Log: cfg.Logger}}, nil
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

// makeHandoffDir creates the directory mounted read-only at
// wire.ChannelDir: host root's and 0711, so code in the sandbox can reach
// the hand-off socket in it (which only the sandbox's root may connect to)
// but can neither list nor change anything there.
func (m *Manager) makeHandoffDir(id string) error {
	dir := m.handoffDir(id)
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("hand-off dir: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("hand-off dir %s: not a directory (%v)", dir, err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("hand-off dir: %w", err)
	}
	return nil
}

// newTask creates a sandbox's init task. Its own output goes to a file: a
// FIFO would need boxd to drain it, and nothing drains it while boxd is
// down. A log a previous init left large is trimmed to its tail first.
func (m *Manager) newTask(ctx context.Context, ctr client.Container) (client.Task, error) {
	logPath := m.initLogPath(ctr.ID())
	if err := trimLog(logPath, initLogMax, initLogKeep); err != nil {
		m.log.Warn("init log", "sandbox", ctr.ID(), "err", err)
	}
	// A shared shim (shimgroups.go) can be on its way out when a task of
	// its group is created: its last container was deleted a moment ago
	// (a stop or an init restart of the group's only member) and its
	// socket still answers. The create then fails before anything is
	// made; a moment later the socket is gone and a new shim starts.
	var task client.Task
	var err error
	ioc := cio.LogFile(logPath)
	if m.isGvisor(ctr.ID()) {
		if ioc, err = gvLogFile(logPath); err != nil {
			return nil, err
		}
	}
	for attempt := 0; ; attempt++ {
		task, err = ctr.NewTask(ctx, ioc)
		if err == nil || attempt == 3 || !shimGone(err) || ctx.Err() != nil {
			return task, err
		}
		m.log.Debug("task: the shim went away, trying again", "sandbox", ctr.ID(), "err", err)
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
}

// shimGone says whether a task create failed because the shim it reached
// closed or refused the connection, not because of the task itself.
func shimGone(err error) bool {
	msg := err.Error()
	for _, s := range []string{"ttrpc: closed", "connection refused", "connection reset by peer", "broken pipe"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// startInit starts the init of ctr (whose runtime-spec is spec) and hands
// it its channel, and returns once the init answers on it. boxd makes the
// agent's listening socket itself, in the sandbox's host directory, and
// listens on the hand-off socket; once the task exists its pid is known,
// and only a peer with that pid and the sandbox root's host uid gets the
// init's settings and the listener (agent/handoff). On failure the task is
// gone again. phase, if not nil, marks progress for timing logs.
//
// beforeTask, if not nil, runs before the task is created (the network
// namespace it joins exists then); beforeStart, if not nil, runs once the
// task exists and before it starts (the network attach is finished there).
// An error of either fails the start.
func (m *Manager) startInit(ctx context.Context, ctr client.Container, spec *specs.Spec, phase func(string), beforeTask, beforeStart func() error) (_ client.Task, retErr error) {
	if phase == nil {
		phase = func(string) {}
	}
	id := ctr.ID()
	cfg, err := oci.InitConfig(spec)
	if err != nil {
		return nil, err
	}
	uid, gid, err := rootHostIDs(spec)
	if err != nil {
		return nil, err
	}
	if err := m.makeHandoffDir(id); err != nil {
		return nil, err
	}
	// A gVisor sandbox's init gets its channel another way
	// (agent/gvchannel): Config from a file, and a socket it binds itself.
	gv := spec.Process != nil && slices.Contains(spec.Process.Args, wire.GvisorFlag)
	var agentLn *os.File
	var hs *handoff.Listener
	if gv {
		if err := m.gvPrepare(id, cfg, uid, gid); err != nil {
			return nil, err
		}
	} else {
		agentLn, err = handoff.ListenAgent(m.socketPath(id))
		if err != nil {
			return nil, err
		}
		// The init holds its own copy once handed over; boxd never serves it.
		defer agentLn.Close()
		defer func() {
			if retErr != nil {
				_ = os.Remove(m.socketPath(id))
			}
		}()
		hs, err = handoff.Listen(filepath.Join(m.handoffDir(id), handoff.SocketName), int(uid), int(gid))
		if err != nil {
			return nil, err
		}
		defer hs.Close()
	}

	if beforeTask != nil {
		if err := beforeTask(); err != nil {
			return nil, err
		}
	}
	task, err := m.newTask(ctx, ctr)
	if err != nil {
		return nil, fmt.Errorf("task: %w", err)
	}
	defer func() {
		if retErr == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := task.Delete(cctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
			m.log.Error("cleanup: delete task", "sandbox", id, "err", err)
		}
	}()
	phase("task")
	if err := m.blkio.account(m.cgPath(id)); err != nil {
		m.log.Debug("block I/O figures may stay 0", "sandbox", id, "err", err)
	}
	if beforeStart != nil {
		if err := beforeStart(); err != nil {
			return nil, err
		}
	}
	if err := task.Start(ctx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	phase("start")
	deadline := time.Now().Add(m.cfg.ReadyTimeout)
	if gv {
		if err := m.gvPinInit(ctx, id, task, uid, deadline); err != nil {
			return nil, err
		}
	} else if err := m.handOff(ctx, id, task, hs, handoff.Peer{Pid: int(task.Pid()), UID: uid}, cfg, agentLn, deadline); err != nil {
		return nil, err
	}
	phase("handoff")
	if err := m.waitReady(ctx, id, task, deadline); err != nil {
		return nil, err
	}
	phase("ready")
	return task, nil
}

// rootHostIDs is the host uid and gid the sandbox's root maps to.
func rootHostIDs(spec *specs.Spec) (uid, gid uint32, _ error) {
	if spec.Linux == nil || len(spec.Linux.UIDMappings) == 0 || len(spec.Linux.GIDMappings) == 0 ||
		spec.Linux.UIDMappings[0].ContainerID != 0 || spec.Linux.GIDMappings[0].ContainerID != 0 {
		return 0, 0, errors.New("spec maps no user namespace root")
	}
	return spec.Linux.UIDMappings[0].HostID, spec.Linux.GIDMappings[0].HostID, nil
}

// handOff waits for the task's init to take cfg and the agent listener,
// while watching that it has not died.
func (m *Manager) handOff(ctx context.Context, id string, task client.Task, hs *handoff.Listener, peer handoff.Peer, cfg handoff.Config, agentLn *os.File, deadline time.Time) error {
	octx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	log := m.log.With("sandbox", id)
	offered := make(chan error, 1)
	go func() {
		offered <- hs.Offer(octx, peer, cfg, agentLn, func(format string, args ...any) {
			log.Warn(fmt.Sprintf(format, args...))
		})
	}()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case err := <-offered:
			if err == nil {
				return nil
			}
			if exited := m.initExited(ctx, id, task); exited != nil {
				return exited
			}
			return fmt.Errorf("init did not take its channel within %s: %w", m.cfg.ReadyTimeout, err)
		case <-poll.C:
			if exited := m.initExited(ctx, id, task); exited != nil {
				cancel()
				<-offered
				return exited
			}
		}
	}
}

// waitReady polls the init's socket until it answers, the task dies, or
// deadline passes.
func (m *Manager) waitReady(ctx context.Context, id string, task client.Task, deadline time.Time) error {
	c := m.agent(id)
	delay := time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if exited := m.initExited(ctx, id, task); exited != nil {
			return exited
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("init did not answer within %s: %w", m.cfg.ReadyTimeout, err)
		}
		time.Sleep(delay)
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// initExited returns an error quoting the init's log if its task has
// stopped, and nil while it runs.
func (m *Manager) initExited(ctx context.Context, id string, task client.Task) error {
	st, err := task.Status(ctx)
	if err != nil || st.Status != client.Stopped {
		return nil
	}
	// The log goes with the failed sandbox: quote it.
	// The shim copies the init's output to the file asynchronously;
	// deleting the task makes it finish (the create's cleanup would
	// delete it anyway).
	_, _ = task.Delete(ctx)
	var logTail []byte
	for i := 0; i < 40 && len(logTail) == 0; i++ {
		logTail, _ = readLogTail(m.initLogPath(id), initLogQuote)
		if len(logTail) == 0 {
			time.Sleep(25 * time.Millisecond)
		}
	}
	if st.ExitStatus == wire.ExitBadUser {
		return fieldErr("user", "the init could not resolve the sandbox's default user: %q", logTail)
	}
	return fmt.Errorf("init exited with status %d before it was ready: %q", st.ExitStatus, logTail)
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

// Get inspects one sandbox by id or name.
func (m *Manager) Get(ctx context.Context, idOrName string) (*Sandbox, error) {
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	sb, err := m.describe(ctx, ctr, true)
	if err != nil {
		return nil, err
	}
	return sb, nil
}

func (m *Manager) describe(ctx context.Context, ctr client.Container, withEnv bool) (*Sandbox, error) {
	return m.describeKnown(ctx, ctr, withEnv, nil)
}

// describeKnown is describe with the task's state already known (nil: ask
// containerd for it).
func (m *Manager) describeKnown(ctx context.Context, ctr client.Container, withEnv bool, known *task.Process) (*Sandbox, error) {
	info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return nil, fmt.Errorf("inspect sandbox %s: %w", ctr.ID(), err)
	}
	var rec record
	if err := json.Unmarshal([]byte(info.Labels[LabelSandbox]), &rec); err != nil {
		return nil, fmt.Errorf("inspect sandbox %s: corrupt %s label: %w", ctr.ID(), LabelSandbox, err)
	}
	sb := m.toSandbox(ctr.ID(), info.Labels, rec)
	if withEnv && info.Spec != nil {
		var s specs.Spec
		if err := json.Unmarshal(info.Spec.GetValue(), &s); err == nil {
			sb.Env = commandEnv(&s)
		}
	}
	sb.State = "unknown"
	var t client.Task // err is nil here: Info succeeded
	if known == nil {
		t, err = ctr.Task(ctx, nil)
	}
	switch {
	case errdefs.IsNotFound(err):
		sb.State = "stopped"
	case known != nil:
		sb.InitPID = known.Pid
		// As the client's Task.Status spells it.
		sb.State = strings.ToLower(known.Status.String())
	case err == nil:
		sb.InitPID = t.Pid()
		if st, err := t.Status(ctx); err == nil {
			sb.State = string(st.Status)
		}
	}
	if err == nil && sb.State != "stopped" {
		// containerd does not see boxd's freezer writes: the kernel's
		// state is the truth.
		if sb.State == string(client.Running) {
			if f, err := m.freezer.frozen(m.cgPath(sb.ID)); err == nil && f {
				sb.State = string(client.Paused)
				p := m.pausedAt(sb.ID)
				sb.PausedAt, sb.PauseReason = p.At, p.Reason
			}
		}
		if withEnv && (sb.State == string(client.Running) || sb.State == string(client.Paused)) {
			if t == nil {
				t, err = ctr.Task(ctx, nil)
			}
			var u *Usage
			if err == nil {
				u, err = usage(ctx, t, m.cgPath(sb.ID))
			}
			if err == nil {
				sb.Usage = u
			} else {
				m.log.Debug("usage", "sandbox", sb.ID, "err", err)
			}
			m.diskUsage(ctx, ctr, sb)
		}
	}
	return sb, nil
}

// commandEnv is the environment commands get, as stored in s, without the
// HOSTNAME boxd adds.
func commandEnv(s *specs.Spec) []string {
	var env []string
	if cfg, err := oci.InitConfig(s); err == nil {
		for _, kv := range cfg.Env {
			if !strings.HasPrefix(kv, "HOSTNAME=") {
				env = append(env, kv)
			}
		}
		return env
	}
	// A spec made by an older boxd kept it in the init's environment,
	// next to the init's own BOXD_ settings.
	if s.Process != nil {
		for _, kv := range s.Process.Env {
			if !strings.HasPrefix(kv, "BOXD_") && !strings.HasPrefix(kv, "HOSTNAME=") {
				env = append(env, kv)
			}
		}
	}
	return env
}

func (m *Manager) toSandbox(id string, labels map[string]string, rec record) *Sandbox {
	sb := &Sandbox{
		ID: id, Name: rec.Name, Image: rec.Image,
		Limits:  Limits{MemoryBytes: rec.Memory, CPUs: rec.CPUs, Pids: rec.Pids, DiskBytes: rec.Disk},
		Workdir: rec.Workdir, CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt,
		Labels:   map[string]string{},
		UIDMap:   fmt.Sprintf("0:%d:%d", rec.HostUID, rec.IDMapSize),
		OwnerUID: ownerOf(labels),
		Ports:    parsePorts(labels[LabelPorts]),
		Restarts: restartInfo(labels),
		Runtime:  RuntimeInfo{Name: rec.Runtime, Version: rec.RuntimeVersion, Advisories: rec.RuntimeAdvisories},
		Idle:     m.idleInfo(id, labels),
		User:     rec.User, Tunables: rec.Tunables,
		hostUID: rec.HostUID, shimGroup: rec.ShimGroup,
	}
	if t, err := time.Parse(time.RFC3339, labels[LabelStopped]); err == nil {
		sb.StoppedAt = t
	}
	st, err := parseNetState(labels)
	if err != nil {
		m.log.Warn("inspect", "sandbox", id, "err", err)
	}
	gw := ""
	if m.cfg.Network != nil && st != nil {
		gw = m.cfg.Network.Gateway().String()
	}
	sb.Network = st.info(gw)
	for k, v := range labels {
		if len(k) > len(UserLabelPrefix) && k[:len(UserLabelPrefix)] == UserLabelPrefix {
			sb.Labels[k[len(UserLabelPrefix):]] = v
		}
	}
	return sb
}

// ListFilter narrows a listing. A caller that is not an admin lists only
// its own sandboxes whatever the filter says (the API refuses All and
// another's Owner for it); an admin lists its own unless All or Owner.
type ListFilter struct {
	Labels map[string]string
	All    bool
	Owner  *uint32 // only this uid's
}

// listOwnerFilter is the containerd filter for the client-visible
// sandboxes f's owner fields and ctx's caller allow a listing to show:
// the caller's own, unless an admin asks for all or another owner's.
func listOwnerFilter(ctx context.Context, f ListFilter) (string, error) {
	filter := fmt.Sprintf(`labels."%s"==true`, LabelManaged)
	if c, ok := CallerFrom(ctx); ok || f.Owner != nil {
		uid := c.UID
		switch {
		case f.Owner != nil && (c.Admin || c.Unchecked || *f.Owner == c.UID || !ok):
			uid = *f.Owner
		case f.Owner != nil:
			return "", fmt.Errorf("owner: only root and --admin-group members may list another user's sandboxes: %w", errdefs.ErrPermissionDenied)
		case f.All && !(c.Admin || c.Unchecked):
			return "", fmt.Errorf("all: only root and --admin-group members may list every user's sandboxes: %w", errdefs.ErrPermissionDenied)
		}
		if f.Owner != nil || !f.All {
			filter += fmt.Sprintf(`,labels."%s"==%s`, LabelOwner, strconv.Quote(strconv.FormatUint(uint64(uid), 10)))
		}
	}
	return filter, nil
}

// List returns the sandboxes the caller may see (see ListFilter), or those
// of them carrying all the given labels, sorted by creation time.
func (m *Manager) List(ctx context.Context, labels map[string]string) ([]*Sandbox, error) {
	return m.ListFiltered(ctx, ListFilter{Labels: labels})
}

// ListFiltered is List with an owner filter.
func (m *Manager) ListFiltered(ctx context.Context, f ListFilter) ([]*Sandbox, error) {
	labels := f.Labels
	filter, err := listOwnerFilter(ctx, f)
	if err != nil {
		return nil, err
	}
	for k, v := range labels {
		if !labelKeyRe.MatchString(k) {
			return nil, fieldErr("labels", "key %q must be letters, digits, _ . / -", k)
		}
		filter += fmt.Sprintf(`,labels."%s%s"==%s`, UserLabelPrefix, k, strconv.Quote(v))
	}
	ctrs, err := m.cfg.Client.Containers(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	// Every task's state in one call, after the containers were listed (a
	// container whose task is not in it is asked on its own): one call
	// each for the task and its status was two round trips per sandbox.
	states := map[string]*task.Process{}
	if len(ctrs) > 1 {
		if resp, err := m.cfg.Client.TaskService().List(ctx, &tasks.ListTasksRequest{}); err == nil {
			for _, t := range resp.Tasks {
				states[t.ID] = t
			}
		}
	}
	out := make([]*Sandbox, 0, len(ctrs))
	for _, ctr := range ctrs {
		sb, err := m.describeKnown(ctx, ctr, false, states[ctr.ID()])
		if err != nil {
			if errdefs.IsNotFound(err) {
				continue // deleted while we listed
			}
			return nil, err
		}
		out = append(out, sb)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].ID < out[j].ID
		}
		return out[i].CreatedAt.Before(out[j].CreatedAt)
	})
	return out, nil
}

// Delete destroys a sandbox and its data: task, container, snapshot and
// state directory.
func (m *Manager) Delete(ctx context.Context, idOrName string) error {
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return err
	}
	return m.destroy(ctx, ctr)
}

func (m *Manager) destroy(ctx context.Context, ctr client.Container) error {
	id := ctr.ID()
	// The reconciler may hold the sandbox for a moment; a create or another
	// delete holds it longer.
	if !m.claimWait(ctx, id, 5*time.Second) {
		return fmt.Errorf("sandbox %s is being created, restarted or deleted: %w", id, errdefs.ErrConflict)
	}
	defer m.release(id)
	m.inv.hide(id)
	m.ports.Release(id, nil)
	// A warm-pool member was never a client's sandbox: its end is no event.
	member, owner := false, uint32(0)
	if info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata); err == nil {
		member, owner = info.Labels[LabelPool] != "", ownerOf(info.Labels)
	}
	task, err := ctr.Task(ctx, nil)
	if err == nil {
		m.thawForDelete(ctx, id)
		// WithProcessKill waits for the exit before it kills, so none is
		// missed, then deletes.
		if err := deleteTask(ctx, ctr, task); err != nil {
			return fmt.Errorf("delete sandbox %s: task: %w", id, err)
		}
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete sandbox %s: load task: %w", id, err)
	}
	// A fork's writable layer sits on a fork layer, which goes with the
	// last sandbox on it.
	var sn snapshots.Snapshotter
	var parent string
	if info, err := ctr.Info(ctx, client.WithoutRefreshedMetadata); err == nil && info.SnapshotKey != "" {
		sn = m.cfg.Client.SnapshotService(info.Snapshotter)
		if si, err := sn.Stat(ctx, info.SnapshotKey); err == nil {
			parent = si.Parent
		}
	}
	rec, hasRec := recorded(ctx, ctr)
	// A capped writable layer is unmounted first: its snapshot directory
	// cannot be removed under a mount.
	if l, ok, err := m.containerDisk(ctx, ctr); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete sandbox %s: disk: %w", id, err)
	} else if ok {
		if err := l.Unmount(); err != nil {
			return fmt.Errorf("delete sandbox %s: %w", id, err)
		}
	}
	if err := ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete sandbox %s: container: %w", id, err)
	}
	// Fork layers hold unshifted ids, like image layers: nothing of the
	// sandbox's uid block is left in them.
	if sn != nil {
		m.pruneForkLayers(ctx, sn, parent)
	}
	// The container and its writable layer are gone, so no file of the
	// sandbox's uid block is left: the block may serve another sandbox.
	// Its shim has no container of it left either: the place in the
	// group is free.
	if hasRec {
		if rec.HostUID != 0 {
			m.ids.give(rec.HostUID)
		}
		m.shims.give(rec.ShimGroup)
	}
	// The namespace outlives the task (it is pinned); release it, the
	// address and the rules now.
	if err := m.teardownNetwork(ctx, id); err != nil {
		return fmt.Errorf("delete sandbox %s: network: %w", id, err)
	}
	m.inv.forget(id)
	m.execDefs.Delete(id)
	m.oomFiles.forget(id)
	m.dropAgentPool(id)
	m.pool.signal() // a slot under max-sandboxes may be free for a member
	m.forgetActivity(id)
	if err := os.RemoveAll(m.sandboxDir(id)); err != nil {
		return fmt.Errorf("delete sandbox %s: state dir: %w", id, err)
	}
	m.log.Info("deleted", "sandbox", id)
	if !member {
		m.cfg.Events.Emit(events.Deleted, id, owner, nil) // forgotten by the inventory: the owner from its labels
	}
	return nil
}

// recorded is the sandbox's record label, read before it is deleted: its
// uid block and shim group go back after.
func recorded(ctx context.Context, ctr client.Container) (record, bool) {
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return record{}, false
	}
	var rec record
	if json.Unmarshal([]byte(labels[LabelSandbox]), &rec) != nil {
		return record{}, false
	}
	return rec, true
}

// deleteTask kills and deletes a sandbox's task. Under load the shim can
// close its connection mid-call ("ttrpc: closed") after doing the work, so
// a failure is retried against a freshly loaded task, and a task that is
// gone by then counts as deleted.
func deleteTask(ctx context.Context, ctr client.Container, task client.Task) error {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
			if task, err = ctr.Task(ctx, nil); errdefs.IsNotFound(err) {
				return nil
			} else if err != nil {
				continue
			}
		}
		if _, err = task.Delete(ctx, client.WithProcessKill); err == nil || errdefs.IsNotFound(err) {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
	}
	return err
}

// ReconcileOnce destroys every sandbox whose TTL has passed and restarts
// the init of every other sandbox whose init is gone (a host reboot, an init
// killed from outside): processes are lost then, files are not. It reports
// how many sandboxes it destroyed and restarted.
func (m *Manager) ReconcileOnce(ctx context.Context) (expired, restarted int, _ error) {
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	m.pruneInventory(ctx)
	m.collectNetworks(ctx)
	defer m.relistenAll(ctx)
	ctrs, err := m.cfg.Client.Containers(ctx, fmt.Sprintf(`labels."%s"==true`, LabelManaged))
	if err != nil {
		return 0, 0, fmt.Errorf("reconcile: list: %w", err)
	}
	now := time.Now()
	ids := make([]string, 0, len(ctrs))
	for _, ctr := range ctrs {
		ids = append(ids, ctr.ID())
	}
	m.refreshPaused(ctx, ids)
	var errs []error
	for _, ctr := range ctrs {
		labels, err := ctr.Labels(ctx)
		if err != nil {
			continue
		}
		if exp, err := time.Parse(time.RFC3339, labels[LabelExpiresAt]); err == nil && !now.Before(exp) {
			m.log.Info("ttl expired", "sandbox", ctr.ID(), "expired_at", exp)
			m.cfg.Events.Emit(events.Expired, ctr.ID(), ownerOf(labels), map[string]string{"expires_at": exp.UTC().Format(time.RFC3339)})
			if err := m.destroy(ctx, ctr); err != nil {
				errs = append(errs, err)
				continue
			}
			expired++
			continue
		}
		if m.frozenByBoxd(ctr.ID(), labels) {
			m.thawLeftover(ctx, ctr)
			m.refreshPaused(ctx, []string{ctr.ID()}) // not paused by a user: thawed now
		}
		if gone, err := m.checkIdle(ctx, ctr, labels, now); err != nil {
			errs = append(errs, err)
		} else if gone {
			continue
		}
		if err := trimLog(m.initLogPath(ctr.ID()), initLogMax, initLogKeep); err != nil {
			m.log.Warn("init log", "sandbox", ctr.ID(), "err", err)
		}
		did, err := m.restartIfDead(ctx, ctr)
		if err != nil {
			errs = append(errs, err)
		}
		if did {
			restarted++
		}
	}
	return expired, restarted, errors.Join(errs...)
}

// dead reports whether a sandbox that still exists has no running init.
// One task lookup gives the status too: each lookup is a State call to
// the shim, which under gVisor runs a whole `runsc state` (a process of
// the 100 MB runsc binary, tens of ms of CPU), for every sandbox at every
// reconcile tick; loading the task and then asking its status were two.
func (m *Manager) dead(ctx context.Context, ctr client.Container) bool {
	if _, err := ctr.Info(ctx, client.WithoutRefreshedMetadata); err != nil {
		return false
	}
	resp, err := m.cfg.Client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: ctr.ID()})
	if errdefs.IsNotFound(errgrpc.ToNative(err)) {
		return true
	}
	if err != nil || resp.Process == nil {
		return false
	}
	return resp.Process.Status == task.Status_STOPPED
}

// Run does the background upkeep now and then every interval until ctx
// ends: expiry and restarts. The first pass catches what happened while
// boxd was down.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, _, err := m.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("reconcile", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
