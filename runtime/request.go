// Room: create. CreateRequest and its resolution: sizes, limits, env,
// workdir and TTL checked and defaulted before anything is made.

package runtime

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	units "github.com/docker/go-units"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/boxd-dev/boxd/internal/disk"
	"github.com/boxd-dev/boxd/network"
)

// CreateRequest is what a client asks for. Zero values take the daemon's
// defaults.
type CreateRequest struct {
	Image   string
	Memory  string // "256m", "1g", bytes
	CPUs    float64
	Pids    int64
	Disk    string // "2g": cap of the writable layer; "": the daemon default
	Env     []string
	Workdir string
	Labels  map[string]string
	Name    string
	TTL     string // Go duration
	// Network is the network mode: "" or "none" (loopback only) or
	// "egress"; Allow is the egress allowlist (network.ParseDest).
	Network string
	Allow   []string
	Publish []PortSpec
	// IdleTimeout (Go duration; "" the daemon's, "0" never) and OnIdle
	// (pause or delete; "" the daemon's) are the idle policy.
	IdleTimeout string
	OnIdle      string
	// User is who commands and file operations run as by default (NAME,
	// UID, NAME:GROUP or UID:GID); empty takes the image's USER.
	User     string
	Tunables TunablesRequest
	// Replace deletes a sandbox of the same name first.
	Replace bool
	// Runtime is runc or gvisor; "" the daemon's default.
	Runtime string
	// Cold makes the sandbox from its image even when a warm-pool member
	// could serve the create.
	Cold bool
	// Volumes are named volumes to mount: NAME:/PATH or NAME:/PATH:ro.
	Volumes []string
	// Binds are host directories to mount: HOST:/PATH[:ro][,noexec]
	// (binds.go).
	Binds []string
	// Secrets are the caller's secrets the sandbox is given as
	// placeholders: NAME or NAME=ENVVAR (secrets.go).
	Secrets []string
	// AutoResume: a call into the sandbox's init restores it from its
	// checkpoint, or resumes it from a pause, first (implied by OnIdle
	// checkpoint).
	AutoResume bool
	// Git is a repository to clone into /workspace, "URL[#REF]", and
	// GitDepth the clone's depth (0: all history); git.go.
	Git      string
	GitDepth uint32
}

// Limits are the resource limits every sandbox carries.
type Limits struct {
	MemoryBytes int64
	CPUs        float64
	Pids        int64
	DiskBytes   int64 // 0: no cap
}

// FieldError names the request field that was wrong. It wraps
// errdefs.ErrInvalidArgument so the API maps it to invalid_argument.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }
func (e *FieldError) Unwrap() error { return errdefs.ErrInvalidArgument }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Bounds on what a request may ask for. They keep a typo ("256g") from
// taking the host down and keep labels within containerd's 4 KiB limit.
const (
	MinMemory    = 16 << 20
	MinPids      = 16
	MaxPids      = 1 << 20
	MaxEnv       = 256
	MaxEnvBytes  = 64 << 10
	MaxLabels    = 64
	MaxTTL       = 30 * 24 * time.Hour
	maxLabelKey  = 128
	maxLabelVal  = 1024
	maxNameLen   = 63
	maxPathBytes = 4096
)

// sizeRe is the size grammar boxd documents: decimal digits with an
// optional fraction, optional space, an optional binary unit and an
// optional "b" or "ib". go-units' own grammar is wider (exponents such as
// "1e9", hex floats, a leading ".", "p" for peta, "MIB"), so this decides
// what is a size and go-units only converts the number and the unit.
var sizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([kmgtKMGT]?)(?:i?[bB])?$`)

// ParseSize parses a memory size such as "256m", "1.5g", "512MiB" or a plain
// number of bytes. Units are binary (k = 1024).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	m := sizeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size (examples: 256m, 1g, 1073741824)", s)
	}
	b, err := units.RAMInBytes(m[1] + m[2])
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %v", s, err)
	}
	// A product past int64's range converts to a negative or saturated
	// number: both fall outside the limit of half that range.
	if b < 0 || b >= math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return b, nil
}

var (
	envNameRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	nameRe     = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	labelKeyRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_./-]*$`)
)

// ValidateEnv checks K=V pairs; field names the request field for errors.
func ValidateEnv(field string, env []string) error {
	if len(env) > MaxEnv {
		return fieldErr(field, "%d entries, at most %d allowed", len(env), MaxEnv)
	}
	total := 0
	for _, kv := range env {
		total += len(kv)
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			return fieldErr(field, "%q is not K=V", kv)
		}
		if k == "" {
			return fieldErr(field, "%q has an empty variable name", kv)
		}
		if !envNameRe.MatchString(k) {
			return fieldErr(field, "variable name %q must match [A-Za-z_][A-Za-z0-9_]*", k)
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return fieldErr(field, "%q contains a NUL byte", k)
		}
	}
	if total > MaxEnvBytes {
		return fieldErr(field, "%d bytes in all, at most %d allowed", total, MaxEnvBytes)
	}
	return nil
}

// ValidateWorkdir checks a path inside the sandbox; empty is allowed.
func ValidateWorkdir(field, p string) error {
	if p == "" {
		return nil
	}
	if !path.IsAbs(p) {
		return fieldErr(field, "%q must be an absolute path", p)
	}
	if len(p) > maxPathBytes || strings.IndexByte(p, 0) >= 0 {
		return fieldErr(field, "path is too long or contains NUL")
	}
	return nil
}

// ParseTimeout parses an exec timeout; empty means none.
func ParseTimeout(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fieldErr(field, "%q is not a duration (examples: 500ms, 5s, 2m)", s)
	}
	if d <= 0 {
		return 0, fieldErr(field, "%q must be positive", s)
	}
	return d, nil
}

// resolved is a validated CreateRequest with defaults applied.
type resolved struct {
	image   string
	limits  Limits
	env     []string
	workdir string
	labels  map[string]string
	name    string
	ttl     time.Duration
	network string
	allow   []network.Dest
	// runtime is the OCI runtime: RuntimeRunc or RuntimeGvisor.
	runtime string
	publish []PortSpec
	owner   uint32 // the caller's uid
	idle    idlePolicy
	user    string
	tun     Tunables
	// userSet and workdirSet: the request named them; otherwise the
	// image's USER and WORKDIR apply (withImage).
	userSet, workdirSet bool
	// imgWorkdir is the workdir the image alone gives (a warm-pool
	// member's).
	imgWorkdir string
	// forkParent, set for a fork, is the committed snapshot the new
	// sandbox's writable layer sits on instead of its image's top layer.
	forkParent string
	// forkLayers are forkParent and the fork layers under it, as charged
	// to the owner (record.ForkLayers).
	forkLayers []LayerCharge
	// cold: never served from the warm pool.
	cold bool
	// volumes are the named volumes the sandbox mounts (volumes_mount.go).
	volumes []volumeMount
	// binds are the host directories the sandbox mounts (binds.go).
	binds     []bindMount
	bindCreds *bindCreds
	// secrets are the secrets the sandbox holds placeholders of.
	secrets []network.Brokered
	// id, if set, is the new sandbox's id (a fork's, chosen before its
	// volumes are held and named); empty: a new one.
	id string
	// autoResume: calls restore or resume the sandbox (LabelAutoResume).
	autoResume bool
}

// withinTotals refuses a sandbox whose own limits exceed a daemon-wide
// total: it could never use them.
func (m *Manager) withinTotals(l Limits) error {
	if t := m.cfg.TotalMemory; t > 0 && l.MemoryBytes > t {
		return fmt.Errorf("limits.memory: %d bytes is above the daemon's max-memory-total of %d bytes: %w", l.MemoryBytes, t, errdefs.ErrResourceExhausted)
	}
	if t := m.cfg.TotalPids; t > 0 && l.Pids > t {
		return fmt.Errorf("limits.pids: %d is above the daemon's max-pids-total of %d: %w", l.Pids, t, errdefs.ErrResourceExhausted)
	}
	return nil
}

// resolve validates req and fills in defaults. Every error names its field.
func (m *Manager) resolve(req CreateRequest) (resolved, error) {
	r := resolved{image: req.Image, limits: m.cfg.DefaultLimits, workdir: req.Workdir, name: req.Name, ttl: m.cfg.DefaultTTL}
	if r.image == "" {
		r.image = m.cfg.DefaultImage
	}
	if r.image == "" {
		return r, fieldErr("image", "no image given and the daemon has no default image")
	}
	lim, err := m.parseLimits(req.Memory, req.CPUs, req.Pids, r.limits)
	if err != nil {
		return r, err
	}
	r.limits = lim
	if req.Disk != "" {
		b, err := ParseSize(req.Disk)
		if err != nil {
			return r, fieldErr("limits.disk", "%v", err)
		}
		if b == 0 && m.cfg.DefaultLimits.DiskBytes > 0 {
			return r, fieldErr("limits.disk", "0 (no cap) is not allowed: the daemon caps every sandbox (--default-disk)")
		}
		if b != 0 && b < disk.MinBytes {
			return r, fieldErr("limits.disk", "%s is below the minimum of 16m (0: no cap)", req.Disk)
		}
		if max := m.maxDisk(); max > 0 && b > max {
			return r, fieldErr("limits.disk", "%s is more than the %d bytes of the filesystem boxd keeps sandboxes on", req.Disk, max)
		}
		r.limits.DiskBytes = b
	}
	if err := m.withinTotals(r.limits); err != nil {
		return r, err
	}
	if err := ValidateEnv("env", req.Env); err != nil {
		return r, err
	}
	r.env = req.Env
	r.cold = req.Cold
	r.workdirSet = r.workdir != ""
	if err := ValidateWorkdir("workdir", r.workdir); err != nil {
		return r, err
	}
	if err := ValidateUser("user", req.User); err != nil {
		return r, err
	}
	r.user, r.userSet = req.User, req.User != ""
	tun, err := resolveTunables(req.Tunables, r.limits)
	if err != nil {
		return r, err
	}
	r.tun = tun
	if r.name != "" && (len(r.name) > maxNameLen || !nameRe.MatchString(r.name)) {
		return r, fieldErr("name", "%q must be 1-63 characters of letters, digits, _ . - and start with a letter or digit", r.name)
	}
	if len(req.Labels) > MaxLabels {
		return r, fieldErr("labels", "%d labels, at most %d allowed", len(req.Labels), MaxLabels)
	}
	for k, v := range req.Labels {
		if len(k) > maxLabelKey || !labelKeyRe.MatchString(k) {
			return r, fieldErr("labels", "key %q must be 1-128 characters of letters, digits, _ . / -", k)
		}
		if len(v) > maxLabelVal {
			return r, fieldErr("labels", "value of %q is longer than %d bytes", k, maxLabelVal)
		}
	}
	r.labels = req.Labels
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil {
			return r, fieldErr("ttl", "%q is not a duration (examples: 30m, 1h)", req.TTL)
		}
		if d <= 0 {
			return r, fieldErr("ttl", "%q must be positive", req.TTL)
		}
		if d > MaxTTL {
			return r, fieldErr("ttl", "%q is above the maximum of %s", req.TTL, MaxTTL)
		}
		r.ttl = d
	}
	if err := m.resolveIdle(req, &r); err != nil {
		return r, err
	}
	if err := m.resolveNetwork(req, &r); err != nil {
		return r, err
	}
	var p []PortSpec
	p, err = m.normalizePorts("publish", req.Publish)
	if err != nil {
		return r, err
	}
	r.publish = p
	if r.runtime, err = m.pickRuntime(req.Runtime); err != nil {
		return r, err
	}
	if r.runtime == RuntimeGvisor && r.network == network.ModeEgress && m.cfg.Gvisor.EgressConfigPath == "" {
		// Without its options file runsc runs with --network none: the
		// Sentry has no host network to reach boxd's egress bridge through.
		return r, fmt.Errorf("network: egress is not offered under gvisor here (runsc runs with --network none; use --runtime runc for egress): %w", errdefs.ErrFailedPrecondition)
	}
	return r, checkIdleCheckpoint(req, r)
}

// parseLimits validates the limits a request asks for and returns base
// with them applied; zero values keep base's.
func (m *Manager) parseLimits(memory string, cpus float64, pids int64, base Limits) (Limits, error) {
	l := base
	if memory != "" {
		b, err := ParseSize(memory)
		if err != nil {
			return l, fieldErr("limits.memory", "%v", err)
		}
		if b < MinMemory {
			return l, fieldErr("limits.memory", "%s is below the minimum of 16m", memory)
		}
		if m.cfg.MaxMemory > 0 && b > m.cfg.MaxMemory {
			return l, fieldErr("limits.memory", "%s is above the host's limit of %d bytes", memory, m.cfg.MaxMemory)
		}
		l.MemoryBytes = b
	}
	switch {
	case math.IsNaN(cpus) || math.IsInf(cpus, 0) || cpus < 0:
		return l, fieldErr("limits.cpus", "%v must be a positive number of cores", cpus)
	case cpus > 0 && cpus < 0.01:
		return l, fieldErr("limits.cpus", "%v is below the minimum of 0.01", cpus)
	case cpus > float64(m.cfg.MaxCPUs):
		return l, fieldErr("limits.cpus", "%v is more than the host's %d cores", cpus, m.cfg.MaxCPUs)
	case cpus > 0:
		l.CPUs = cpus
	}
	switch {
	case pids < 0:
		return l, fieldErr("limits.pids", "%d must be positive", pids)
	case pids > MaxPids:
		return l, fieldErr("limits.pids", "%d is above the maximum of %d", pids, MaxPids)
	case pids > 0 && pids < MinPids:
		return l, fieldErr("limits.pids", "%d is too few: the init's own threads count (minimum %d)", pids, MinPids)
	case pids > 0:
		l.Pids = pids
	}
	return l, nil
}

// defaultWorkdir is where commands run when neither the request nor the
// image says.
const defaultWorkdir = "/workspace"

// withImage applies the image's USER and WORKDIR where the request named
// none, as docker does; a WORKDIR that is not absolute is ignored (docker
// resolves it against /, which an image config never needs).
func withImage(r resolved, cfg ocispec.ImageConfig) (resolved, error) {
	r.imgWorkdir = defaultWorkdir
	if wd := cfg.WorkingDir; wd != "" && path.IsAbs(wd) {
		if err := ValidateWorkdir("image", wd); err != nil {
			return r, fieldErr("image", "its WORKDIR %q is not usable", wd)
		}
		r.imgWorkdir = path.Clean(wd)
	}
	if !r.workdirSet {
		r.workdir = r.imgWorkdir
	}
	if !r.userSet && cfg.User != "" {
		if err := ValidateUser("image", cfg.User); err != nil {
			return r, fieldErr("image", "its USER %q is not NAME, UID, NAME:GROUP or UID:GID", cfg.User)
		}
		r.user = cfg.User
	}
	return r, nil
}
