// Room: create. Per-sandbox tunables (read-only root, tmpfs, ulimits,
// hostname, cpu weight, exec defaults): parsed, bounded and recorded.

package runtime

import (
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// Per-sandbox tunables (create flags --read-only, --tmpfs, --ulimit,
// --hostname, --cpu-weight, --memory-low, --exec-timeout, --output-limit).
// Each is explicit, validated here, recorded in the sandbox's label and
// shown by inspect; none can go beyond the ceilings below, and none touches
// capabilities, devices or namespaces.
const (
	// MaxTmpfs bounds the extra tmpfs mounts of one sandbox.
	MaxTmpfs = 8
	// MaxNoFile is the kernel's default fs.nr_open: RLIMIT_NOFILE cannot
	// go higher anyway.
	MaxNoFile = 1 << 20
	// MaxNProc bounds RLIMIT_NPROC; the pids cgroup is the real cap.
	MaxNProc = MaxPids
	// MaxFSize bounds RLIMIT_FSIZE (the largest file a command may write).
	MaxFSize = 1 << 40
	// MaxCPUTime bounds RLIMIT_CPU, in seconds.
	MaxCPUTime = int64(MaxTTL / time.Second)
	// MaxExecTimeout bounds a sandbox's default exec timeout.
	MaxExecTimeout = MaxTTL
	// MaxOutputLimit bounds a sandbox's default output cap per exec.
	MaxOutputLimit = 1 << 30
	// MinCPUWeight and MaxCPUWeight are cgroup v2's cpu.weight range;
	// 100 is the kernel's default.
	MinCPUWeight = 1
	MaxCPUWeight = 10000
	// maxHostname is HOST_NAME_MAX.
	maxHostname = 64
)

// TmpfsMount is one tmpfs mount a sandbox asked for.
type TmpfsMount struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size"`
}

// Ulimits are the rlimits a sandbox asked for; zero keeps boxd's default.
type Ulimits struct {
	NoFile uint64 `json:"nofile,omitempty"`
	NProc  uint64 `json:"nproc,omitempty"`
	CPU    uint64 `json:"cpu,omitempty"` // seconds
	FSize  uint64 `json:"fsize,omitempty"`
}

func (u Ulimits) zero() bool { return u == Ulimits{} }

// Tunables are a sandbox's tunables as validated and recorded.
type Tunables struct {
	ReadOnly    bool          `json:"read_only,omitempty"`
	Tmpfs       []TmpfsMount  `json:"tmpfs,omitempty"`
	Ulimits     Ulimits       `json:"ulimits,omitzero"`
	Hostname    string        `json:"hostname,omitempty"`
	CPUWeight   uint64        `json:"cpu_weight,omitempty"`
	MemoryLow   int64         `json:"memory_low,omitempty"`
	ExecTimeout time.Duration `json:"exec_timeout,omitempty"`
	OutputLimit int64         `json:"output_limit,omitempty"`
}

// defaultSpec reports whether t asks for nothing that changes the
// runtime-spec (a warm-pool member has none of it).
func (t Tunables) defaultSpec() bool {
	return !t.ReadOnly && len(t.Tmpfs) == 0 && t.Ulimits.zero() && t.Hostname == "" && t.CPUWeight == 0 && t.MemoryLow == 0
}

// forbiddenTmpfs are paths a tmpfs may neither cover nor sit under: the
// kernel's and runc's own mounts and boxd's channel into the sandbox.
var forbiddenTmpfs = []string{"/proc", "/sys", "/dev", "/.boxd", "/etc/resolv.conf", "/etc/hosts", "/etc/hostname"}

// allowedUnderDev is the one path under /dev a tmpfs may replace.
const devShm = "/dev/shm"

var hostnameLabelRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidateHostname checks an RFC 1123 host name: dot-separated labels of
// letters, digits and hyphens, each 1-63 characters, neither starting nor
// ending with a hyphen, at most 64 characters in all.
func ValidateHostname(field, h string) error {
	if h == "" {
		return nil
	}
	if len(h) > maxHostname {
		return fieldErr(field, "%q is longer than %d characters", h, maxHostname)
	}
	for _, l := range strings.Split(h, ".") {
		if !hostnameLabelRe.MatchString(strings.ToLower(l)) {
			return fieldErr(field, "%q is not an RFC 1123 host name (labels of letters, digits and -, 1-63 characters, not starting or ending with -)", h)
		}
	}
	return nil
}

// parseTmpfs reads PATH[:SIZE] entries. A size defaults to 64 MiB and may
// not exceed the sandbox's memory limit (tmpfs pages are charged to it).
// /tmp and /dev/shm resize boxd's own mounts; anything else adds one.
func parseTmpfs(field string, in []string, memory int64) ([]TmpfsMount, error) {
	if len(in) > MaxTmpfs {
		return nil, fieldErr(field, "%d mounts, at most %d allowed", len(in), MaxTmpfs)
	}
	var out []TmpfsMount
	for _, e := range in {
		p, sz, hasSize := strings.Cut(e, ":")
		size := int64(64 << 20)
		if hasSize {
			b, err := ParseSize(sz)
			if err != nil {
				return nil, fieldErr(field, "%q: %v", e, err)
			}
			size = b
		}
		if size < 4096 {
			return nil, fieldErr(field, "%q: size must be at least 4k", e)
		}
		if size > memory {
			return nil, fieldErr(field, "%q: size %d is above the sandbox's memory limit of %d bytes", e, size, memory)
		}
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || len(p) > maxPathBytes || strings.ContainsAny(p, "\x00,") {
			return nil, fieldErr(field, "%q: the path must be a clean absolute path other than / (no commas)", e)
		}
		if p != devShm {
			for _, f := range forbiddenTmpfs {
				if p == f || strings.HasPrefix(p, f+"/") {
					return nil, fieldErr(field, "%q: no tmpfs may be mounted at or under %s", e, f)
				}
			}
		}
		if slices.ContainsFunc(out, func(t TmpfsMount) bool { return t.Path == p }) {
			return nil, fieldErr(field, "%q: %s is given twice", e, p)
		}
		out = append(out, TmpfsMount{Path: p, SizeBytes: size})
	}
	return out, nil
}

// parseUlimits reads "name=value" entries: nofile, nproc and cpu (seconds)
// take whole numbers, fsize a size ("1g").
func parseUlimits(field string, in []string) (Ulimits, error) {
	var u Ulimits
	for _, e := range in {
		for _, kv := range strings.Split(e, ",") {
			name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || val == "" {
				return u, fieldErr(field, "%q is not NAME=VALUE (nofile, nproc, cpu, fsize)", kv)
			}
			whole := func(max int64) (uint64, error) {
				n, err := strconv.ParseInt(val, 10, 64)
				if err != nil || n <= 0 {
					return 0, fieldErr(field, "%s=%s: want a positive whole number", name, val)
				}
				if n > max {
					return 0, fieldErr(field, "%s=%s is above boxd's maximum of %d", name, val, max)
				}
				return uint64(n), nil
			}
			var err error
			switch name {
			case "nofile":
				u.NoFile, err = whole(MaxNoFile)
			case "nproc":
				u.NProc, err = whole(MaxNProc)
			case "cpu":
				u.CPU, err = whole(MaxCPUTime)
			case "fsize":
				b, perr := ParseSize(val)
				switch {
				case perr != nil:
					err = fieldErr(field, "fsize=%s: %v", val, perr)
				case b <= 0:
					err = fieldErr(field, "fsize=%s must be positive", val)
				case b > MaxFSize:
					err = fieldErr(field, "fsize=%s is above boxd's maximum of %d bytes", val, int64(MaxFSize))
				default:
					u.FSize = uint64(b)
				}
			default:
				err = fieldErr(field, "unknown limit %q (nofile, nproc, cpu, fsize)", name)
			}
			if err != nil {
				return u, err
			}
		}
	}
	return u, nil
}

// TunablesRequest is the tunables part of a create request, unparsed.
type TunablesRequest struct {
	ReadOnly    bool
	Tmpfs       []string // PATH[:SIZE]
	Ulimits     []string // NAME=VALUE[,NAME=VALUE]
	Hostname    string
	CPUWeight   uint64
	MemoryLow   string
	ExecTimeout string
	OutputLimit int64
}

// resolveTunables validates req against boxd's ceilings and the sandbox's
// own limits.
func resolveTunables(req TunablesRequest, limits Limits) (Tunables, error) {
	t := Tunables{ReadOnly: req.ReadOnly, Hostname: req.Hostname, CPUWeight: req.CPUWeight}
	var err error
	if t.Tmpfs, err = parseTmpfs("tmpfs", req.Tmpfs, limits.MemoryBytes); err != nil {
		return t, err
	}
	if t.Ulimits, err = parseUlimits("ulimits", req.Ulimits); err != nil {
		return t, err
	}
	if err := ValidateHostname("hostname", req.Hostname); err != nil {
		return t, err
	}
	if t.CPUWeight != 0 && (t.CPUWeight < MinCPUWeight || t.CPUWeight > MaxCPUWeight) {
		return t, fieldErr("cpu_weight", "%d is outside %d-%d (100 is the kernel's default)", t.CPUWeight, MinCPUWeight, MaxCPUWeight)
	}
	if req.MemoryLow != "" {
		b, err := ParseSize(req.MemoryLow)
		if err != nil {
			return t, fieldErr("memory_low", "%v", err)
		}
		if b > limits.MemoryBytes {
			return t, fieldErr("memory_low", "%s is above the sandbox's memory limit of %d bytes", req.MemoryLow, limits.MemoryBytes)
		}
		t.MemoryLow = b
	}
	if t.ExecTimeout, err = ParseTimeout("exec_timeout", req.ExecTimeout); err != nil {
		return t, err
	}
	if t.ExecTimeout > MaxExecTimeout {
		return t, fieldErr("exec_timeout", "%s is above the maximum of %s", req.ExecTimeout, MaxExecTimeout)
	}
	switch {
	case req.OutputLimit < 0:
		return t, fieldErr("output_limit", "%d must not be negative", req.OutputLimit)
	case req.OutputLimit > MaxOutputLimit:
		return t, fieldErr("output_limit", "%d is above the maximum of %d bytes", req.OutputLimit, int64(MaxOutputLimit))
	}
	t.OutputLimit = req.OutputLimit
	return t, nil
}

// cpuShares turns a cgroup v2 weight into v1 shares, the inverse of runc's
// shares-to-weight conversion, so runc writes back the weight asked for.
func cpuShares(weight uint64) uint64 {
	if weight == 0 {
		return 0
	}
	return uint64(math.Ceil(2 + float64(weight-1)*262142/9999))
}

// ValidateUser checks a user spec's syntax; whether the user exists is
// for the sandbox's /etc/passwd to say, which only the init reads.
func ValidateUser(field, spec string) error {
	if spec == "" {
		return nil
	}
	if _, _, err := wire.ParseUserSpec(spec); err != nil {
		return fieldErr(field, "%q is not NAME, UID, NAME:GROUP or UID:GID", spec)
	}
	return nil
}
