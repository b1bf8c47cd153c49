//go:build linux

// Room: shared. Config, the daemon-wide settings a Manager is made
// with, and their defaults.

package runtime

import (
	"log/slog"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/network/ports"
	"github.com/boxd-dev/boxd/snapshot"
)

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

	// MaxCheckpointBytes bounds the total size of checkpoints on disk
	// (--max-checkpoint-bytes).
	MaxCheckpointBytes int64

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
	// BindRoots are the host directories beneath which callers may bind
	// directories of their own (--allow-bind; binds.go); none: no binds.
	BindRoots []string
}
