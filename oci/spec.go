// Package oci turns a sandbox Config into an OCI runtime-spec. It is pure:
// nothing here talks to containerd or changes the host, so every field of the
// result can be checked by table tests without root. A few host facts still
// leak in through containerd's helpers: the seccomp profile depends on the
// kernel version and GOARCH, and the masked paths include the host's
// /sys/devices/system/cpu/cpu*/thermal_throttle directories. Off Linux the
// seccomp helper yields an empty profile, so Spec fails there.
package oci

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/core/containers"
	coci "github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/agent/handoff"
	"github.com/boxd-dev/boxd/agent/wire"
)

// Defaults used when the matching Config field is zero, and fixed values that
// have no Config field. They are exported so that inspect output and docs can
// show what a sandbox really got.
const (
	DefaultPathEnv      = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	DefaultTmpSizeBytes = 64 << 20
	DefaultNoFile       = 1024
	// DefaultNProc is generous on purpose. RLIMIT_NPROC is counted per uid,
	// and on kernels before 5.14 that is the host uid: sandboxes sharing an
	// ID range would share one count, so a tight limit lets one sandbox keep
	// another from forking. The pids cgroup (Config.Pids) is the per-sandbox
	// cap; this rlimit is only a backstop.
	DefaultNProc = 4096
	DefaultFSize = 1 << 30
	// ShmSizeBytes caps /dev/shm. It is memory charged to the sandbox's
	// cgroup, but without a cap a single writer could fill the memory limit
	// through a file nobody frees.
	ShmSizeBytes = 64 << 20
	// CPUPeriod is the CFS period in microseconds; the quota is CPUs times it.
	CPUPeriod = 100000

	// The kernel refuses a CFS quota below 1 ms.
	minCPUQuota = 1000
	// Far above any real machine; only there to keep the quota from
	// overflowing int64.
	maxCPUs = 1 << 16
	// HOST_NAME_MAX on Linux; sethostname fails beyond it, and failing here
	// gives a clearer error than runc does at start.
	maxHostname = 64
	// A DNS label; used when the hostname is derived from the ID.
	defaultHostnameLen = 63
)

// capabilities is the only set a sandbox's root gets. It is what root needs to
// behave like root on its own files (chown, override permissions, change
// uids) and nothing that reaches the kernel or other processes: no NET_RAW
// (spoofed packets), MKNOD, AUDIT_WRITE, SYS_ADMIN or SYS_PTRACE. containerd's
// default set also has MKNOD, NET_RAW, SETFCAP and AUDIT_WRITE, so it is
// replaced rather than trimmed.
var capabilities = []string{
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_FOWNER",
	"CAP_FSETID",
	"CAP_KILL",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT",
}

// DefaultCapabilities returns a copy of the capability set every sandbox gets
// (bounding, effective and permitted; inheritable and ambient stay empty).
func DefaultCapabilities() []string { return slices.Clone(capabilities) }

// requiredMaskedPaths and requiredReadonlyPaths are Docker's lists. containerd
// ships the same ones today, but WithMaskedPaths replaces rather than adds, and
// a future containerd could drop an entry; taking the union keeps a library
// upgrade from silently unmasking /proc/kcore.
var (
	requiredMaskedPaths = []string{
		"/proc/acpi",
		"/proc/asound",
		"/proc/interrupts",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	requiredReadonlyPaths = []string{
		"/proc/bus",
		"/proc/fs",
		"/proc/irq",
		"/proc/sys",
		"/proc/sysrq-trigger",
	}
)

// FieldError reports a Config field that cannot produce a sensible spec.
// Callers can map it to an invalid-argument error naming Field.
type FieldError struct {
	Field  string // Config field name, e.g. "MemoryBytes" or "Env[2]"
	Reason string
}

func (e *FieldError) Error() string {
	return "oci: invalid Config." + e.Field + ": " + e.Reason
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Spec builds the runtime-spec for a sandbox. ctx must carry a containerd
// namespace (namespaces.WithNamespace): containerd's generator reads it for the
// default cgroup path.
func Spec(ctx context.Context, c Config) (*specs.Spec, error) {
	if err := validate(c); err != nil {
		return nil, err
	}
	env, err := buildEnv(c.Env)
	if err != nil {
		return nil, err
	}
	initCfg, err := handoff.Config{Workdir: c.Workdir, Env: env, Pids: c.Pids, User: c.User}.Encode()
	if err != nil {
		return nil, fieldErr("Env", "%v", err)
	}

	args := []string{wire.InitPath}
	// The init runs below its commands (see wire.InitOOMScoreAdj). Under
	// gVisor the host sees one sandbox process, whose OOM kill ends the
	// sandbox whatever runs inside, so it stays at the commands' score.
	oomScore := wire.InitOOMScoreAdj
	if c.AgentDir != "" {
		args = append(args, wire.GvisorFlag)
		oomScore = wire.CommandOOMScoreAdj
	}
	opts := []coci.SpecOpts{
		coci.WithProcessArgs(args...),
		// The init chdirs to the workdir itself once it has created it; the
		// runtime would fail on a directory that does not exist yet.
		coci.WithProcessCwd("/"),
		coci.WithUIDGID(0, 0),
		// The init's own environment is PATH and nothing an image or a
		// request chose: variables like GODEBUG or GOMAXPROCS would steer
		// its Go runtime. Commands get env through the hand-off, from the
		// annotation.
		withEnv([]string{DefaultPathEnv}),
		coci.WithAnnotations(map[string]string{InitAnnotation: string(initCfg)}),
		withNoTerminal,
		coci.WithNoNewPrivileges,
		withOOMScoreAdj(oomScore),
		coci.WithHostname(hostname(c)),

		// Capabilities before seccomp: the default profile opens syscalls
		// according to the bounding set.
		coci.WithCapabilities(slices.Clone(capabilities)),
		coci.WithAmbientCapabilities(nil), // also clears Inheritable
		seccomp.WithDefaultProfile(),
		withDeniedSyscalls,

		coci.WithUserNamespace(
			[]specs.LinuxIDMapping{{ContainerID: 0, HostID: c.HostUID, Size: c.IDMapSize}},
			[]specs.LinuxIDMapping{{ContainerID: 0, HostID: c.HostGID, Size: c.IDMapSize}},
		),
		// A private cgroup namespace hides the host's cgroup layout (and
		// thereby other sandboxes' ids) from /proc/self/cgroup.
		coci.WithLinuxNamespace(specs.LinuxNamespace{Type: specs.CgroupNamespace}),

		coci.WithRootFSPath("rootfs"),
		withRootfsReadonly(c.ReadOnlyRootfs),
		withRootfsPropagation("rprivate"),
		withMaskedPaths(requiredMaskedPaths),
		withReadonlyPaths(requiredReadonlyPaths),
		coci.WithDevShmSize(orDefaultInt(c.ShmSizeBytes, ShmSizeBytes) >> 10),
		withMountOption("/run", "nodev"),
		coci.WithMounts(mounts(c)),

		withDevices,

		coci.WithMemoryLimit(uint64(c.MemoryBytes)),
		// Swap is memory+swap on cgroup v1 and runc turns it into
		// swap.max = Swap - Limit on v2: equal to the limit means no swap on
		// both.
		coci.WithMemorySwap(c.MemoryBytes),
		coci.WithCPUCFS(cpuQuota(c.CPUs), CPUPeriod),
		coci.WithPidsLimit(c.Pids),

		withRlimit("RLIMIT_CORE", 0),
		withRlimit("RLIMIT_NOFILE", orDefault(c.NoFile, DefaultNoFile)),
		withRlimit("RLIMIT_NPROC", orDefault(c.NProc, DefaultNProc)),
		withRlimit("RLIMIT_FSIZE", orDefault(c.FSize, DefaultFSize)),
	}
	if c.CPUTime > 0 {
		opts = append(opts, withRlimit("RLIMIT_CPU", c.CPUTime))
	}
	if c.CPUShares > 0 {
		opts = append(opts, coci.WithCPUShares(c.CPUShares))
	}
	if c.MemoryLow > 0 {
		opts = append(opts, withMemoryReservation(c.MemoryLow))
	}
	if c.NetNSPath != "" {
		opts = append(opts, WithNetNS(c.NetNSPath), WithResolvConf(c.ResolvConf))
	}
	// Empty keeps containerd's "/<namespace>/<id>".
	if c.CgroupsPath != "" {
		opts = append(opts, coci.WithCgroup(c.CgroupsPath))
	}

	s, err := coci.GenerateSpec(ctx, nil, &containers.Container{ID: c.ID}, opts...)
	if err != nil {
		return nil, fmt.Errorf("oci: generate spec for sandbox %q: %w", c.ID, err)
	}
	// contrib/seccomp returns an empty profile off Linux; a sandbox without
	// seccomp must never be started, so refuse rather than return it.
	if sc := s.Linux.Seccomp; sc == nil || sc.DefaultAction != specs.ActErrno || len(sc.Syscalls) == 0 {
		return nil, fmt.Errorf("oci: sandbox %q: no usable seccomp profile on %s/%s", c.ID, runtime.GOOS, runtime.GOARCH)
	}
	return s, nil
}

func validate(c Config) error {
	switch {
	case c.ID == "":
		return fieldErr("ID", "must not be empty")
	case len(c.Hostname) > maxHostname:
		return fieldErr("Hostname", "longer than %d bytes", maxHostname)
	case c.Workdir != "" && !filepath.IsAbs(c.Workdir):
		return fieldErr("Workdir", "must be an absolute path, got %q", c.Workdir)
	case c.MemoryBytes <= 0:
		return fieldErr("MemoryBytes", "must be > 0, got %d", c.MemoryBytes)
	// Written so that NaN fails too.
	case !(c.CPUs > 0):
		return fieldErr("CPUs", "must be > 0, got %v", c.CPUs)
	case c.CPUs > maxCPUs:
		return fieldErr("CPUs", "must be <= %d, got %v", maxCPUs, c.CPUs)
	case cpuQuota(c.CPUs) < minCPUQuota:
		return fieldErr("CPUs", "must be >= %v (the kernel's minimum CFS quota), got %v",
			float64(minCPUQuota)/CPUPeriod, c.CPUs)
	case c.Pids <= 0:
		return fieldErr("Pids", "must be > 0, got %d", c.Pids)
	case c.IDMapSize == 0:
		return fieldErr("IDMapSize", "must be > 0")
	// Mapping the sandbox's root to the host's root would undo the user
	// namespace.
	case c.HostUID == 0:
		return fieldErr("HostUID", "must not be 0 (sandbox root would be host root)")
	case c.HostGID == 0:
		return fieldErr("HostGID", "must not be 0 (sandbox root would be host root)")
	// (uid_t)-1 is not a valid id, so the range must end below it.
	case uint64(c.HostUID)+uint64(c.IDMapSize) > math.MaxUint32:
		return fieldErr("IDMapSize", "HostUID %d + %d overflows the uid space", c.HostUID, c.IDMapSize)
	case uint64(c.HostGID)+uint64(c.IDMapSize) > math.MaxUint32:
		return fieldErr("IDMapSize", "HostGID %d + %d overflows the gid space", c.HostGID, c.IDMapSize)
	case !filepath.IsAbs(c.InitBinary):
		return fieldErr("InitBinary", "must be an absolute host path, got %q", c.InitBinary)
	case !filepath.IsAbs(c.ChannelDir):
		return fieldErr("ChannelDir", "must be an absolute host path, got %q", c.ChannelDir)
	case c.AgentDir != "" && !filepath.IsAbs(c.AgentDir):
		return fieldErr("AgentDir", "must be an absolute host path, got %q", c.AgentDir)
	case c.NetNSPath != "" && !filepath.IsAbs(c.NetNSPath):
		return fieldErr("NetNSPath", "must be an absolute host path, got %q", c.NetNSPath)
	case c.NetNSPath != "" && !filepath.IsAbs(c.ResolvConf):
		return fieldErr("ResolvConf", "must be an absolute host path with NetNSPath, got %q", c.ResolvConf)
	case c.TmpSizeBytes < 0:
		return fieldErr("TmpSizeBytes", "must be >= 0, got %d", c.TmpSizeBytes)
	case c.ShmSizeBytes < 0:
		return fieldErr("ShmSizeBytes", "must be >= 0, got %d", c.ShmSizeBytes)
	case c.MemoryLow < 0 || c.MemoryLow > c.MemoryBytes:
		return fieldErr("MemoryLow", "must be between 0 and MemoryBytes, got %d", c.MemoryLow)
	}
	for i, t := range c.Tmpfs {
		if !filepath.IsAbs(t.Path) || filepath.Clean(t.Path) != t.Path || t.Path == "/" {
			return fieldErr(fmt.Sprintf("Tmpfs[%d]", i), "path must be a clean absolute path other than /, got %q", t.Path)
		}
		if t.SizeBytes <= 0 {
			return fieldErr(fmt.Sprintf("Tmpfs[%d]", i), "size must be > 0, got %d", t.SizeBytes)
		}
	}
	return nil
}

// buildEnv returns c.Env with one entry per key (the last one wins, at the
// position of the first, as "later entries win" promises; a duplicate left in
// place would make getenv return the first) and PATH added if missing. It
// does not use containerd's WithEnv, which treats "KEY" without "=" as unset
// and keeps duplicate keys that the defaults lack.
func buildEnv(in []string) ([]string, error) {
	out := make([]string, 0, len(in)+1)
	index := make(map[string]int, len(in))
	for i, kv := range in {
		k, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return nil, fieldErr("Env["+strconv.Itoa(i)+"]", "%q is not KEY=VALUE", kv)
		case k == "":
			return nil, fieldErr("Env["+strconv.Itoa(i)+"]", "%q has an empty key", kv)
		case strings.IndexByte(kv, 0) >= 0:
			// execve would silently cut the entry at the NUL.
			return nil, fieldErr("Env["+strconv.Itoa(i)+"]", "contains a NUL byte")
		}
		if j, seen := index[k]; seen {
			out[j] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	if _, ok := index["PATH"]; !ok {
		out = append([]string{DefaultPathEnv}, out...)
	}
	return out, nil
}

func hostname(c Config) string {
	if c.Hostname != "" {
		return c.Hostname
	}
	if len(c.ID) > defaultHostnameLen {
		return c.ID[:defaultHostnameLen]
	}
	return c.ID
}

// cpuQuota rounds rather than truncates so that 0.3 cores is 30000 µs, not
// 29999.
func cpuQuota(cpus float64) int64 {
	return int64(math.Round(cpus * CPUPeriod))
}

func orDefaultInt(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// withMemoryReservation sets the memory the kernel protects from reclaim
// (memory.low on cgroup v2, memory.soft_limit_in_bytes on v1).
func withMemoryReservation(b int64) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		if s.Linux.Resources == nil {
			s.Linux.Resources = &specs.LinuxResources{}
		}
		if s.Linux.Resources.Memory == nil {
			s.Linux.Resources.Memory = &specs.LinuxMemory{}
		}
		s.Linux.Resources.Memory.Reservation = &b
		return nil
	}
}

func orDefault(v, def uint64) uint64 {
	if v == 0 {
		return def
	}
	return v
}

// mounts returns the mounts boxd adds to containerd's defaults (/proc, /dev,
// /dev/pts, /dev/shm, /dev/mqueue, /sys read-only, /run). No host path is
// mounted besides the init binary and the channel directory, both
// read-only; in particular no
// /etc/resolv.conf or /etc/hosts, so nothing points the sandbox at the host's
// resolver.
func mounts(c Config) []specs.Mount {
	tmpSize := c.TmpSizeBytes
	if tmpSize == 0 {
		tmpSize = DefaultTmpSizeBytes
	}
	size := "size=" + strconv.FormatInt(tmpSize, 10)
	m := []specs.Mount{{
		Destination: "/tmp",
		Type:        "tmpfs",
		Source:      "tmpfs",
		Options:     []string{"nosuid", "nodev", "mode=1777", size},
	}}
	// With a writable rootfs the init creates /workspace in the snapshot's
	// writable layer, so nothing is mounted there. With a read-only rootfs
	// it could not, so /workspace becomes a tmpfs: its data then lives in
	// memory (charged to the sandbox's memory cgroup) and is gone when the
	// sandbox stops.
	if c.ReadOnlyRootfs {
		m = append(m, specs.Mount{
			Destination: "/workspace",
			Type:        "tmpfs",
			Source:      "tmpfs",
			Options:     []string{"nosuid", "nodev", "mode=755", size},
		})
	}
	for _, t := range c.Tmpfs {
		m = append(m, specs.Mount{
			Destination: t.Path,
			Type:        "tmpfs",
			Source:      "tmpfs",
			Options:     []string{"nosuid", "nodev", "mode=1777", "size=" + strconv.FormatInt(t.SizeBytes, 10)},
		})
	}
	if c.AgentDir != "" {
		m = append(m, specs.Mount{
			Destination: wire.AgentDir,
			Type:        "bind",
			Source:      c.AgentDir,
			// The init binds the agent socket here; boxd opens what is
			// there without following it (agent/gvchannel).
			Options: []string{"rbind", "rw", "nosuid", "nodev", "noexec"},
		})
	}
	return append(m,
		specs.Mount{
			Destination: wire.InitPath,
			Type:        "bind",
			Source:      c.InitBinary,
			Options:     []string{"rbind", "ro", "nosuid", "nodev"},
		},
		specs.Mount{
			Destination: wire.ChannelDir,
			Type:        "bind",
			Source:      c.ChannelDir,
			// boxd's hand-off socket, briefly: the sandbox only connects
			// to it, and must not be able to change what is there.
			Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"},
		},
	)
}

// InitAnnotation is the runtime-spec annotation that holds the init's
// hand-off Config (JSON): the environment of commands, the default workdir
// and the pids limit. boxd sends it to every init it starts for the
// sandbox, and inspect reads the environment back from it.
const InitAnnotation = "boxd.io/init"

// InitConfig returns the hand-off Config stored in s.
func InitConfig(s *specs.Spec) (handoff.Config, error) {
	v, ok := s.Annotations[InitAnnotation]
	if !ok {
		return handoff.Config{}, fmt.Errorf("oci: spec has no %s annotation (made by an older boxd?)", InitAnnotation)
	}
	return handoff.Decode([]byte(v))
}

func withEnv(env []string) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		s.Process.Env = env
		return nil
	}
}

// withNoTerminal is explicit so that the spec does not depend on the zero
// value: the init talks over its channel, never a console.
func withNoTerminal(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
	s.Process.Terminal = false
	s.Process.ConsoleSize = nil
	return nil
}

func withOOMScoreAdj(v int) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		s.Process.OOMScoreAdj = &v
		return nil
	}
}

func withRootfsReadonly(ro bool) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		s.Root.Readonly = ro
		return nil
	}
}

func withRootfsPropagation(p string) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		s.Linux.RootfsPropagation = p
		return nil
	}
}

// withMaskedPaths adds paths to the spec's list (containerd's own option
// replaces it, losing the host-specific thermal_throttle entries containerd
// computes).
func withMaskedPaths(paths []string) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		s.Linux.MaskedPaths = union(s.Linux.MaskedPaths, paths)
		return nil
	}
}

func withReadonlyPaths(paths []string) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		s.Linux.ReadonlyPaths = union(s.Linux.ReadonlyPaths, paths)
		return nil
	}
}

func union(have, want []string) []string {
	out := slices.Clone(have)
	for _, p := range want {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// withMountOption adds opt to the default mount at dest. containerd mounts
// /run without nodev; device nodes have no business there.
func withMountOption(dest, opt string) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		for i := range s.Mounts {
			if s.Mounts[i].Destination != dest {
				continue
			}
			if !slices.Contains(s.Mounts[i].Options, opt) {
				s.Mounts[i].Options = append(slices.Clone(s.Mounts[i].Options), opt)
			}
			return nil
		}
		return fmt.Errorf("oci: no default mount at %s to add %q to", dest, opt)
	}
}

// allowedDevice is one character device a sandbox may open. runc itself
// creates the nodes for null, zero, full, random, urandom and tty (bind
// mounts from the host inside a user namespace) and links /dev/ptmx to
// /dev/pts/ptmx; the cgroup rules decide which of them can be opened.
type allowedDevice struct {
	name         string
	major, minor int64 // minor -1: any
}

var allowedDevices = []allowedDevice{
	{"null", 1, 3},
	{"zero", 1, 5},
	{"full", 1, 7},
	{"random", 1, 8},
	{"urandom", 1, 9},
	{"tty", 5, 0},
	{"ptmx", 5, 2},
	// The pty slaves behind /dev/pts; ptmx is useless without them.
	{"pts/*", 136, -1},
}

// withDevices replaces the device cgroup rules with deny-all followed by the
// devices above. containerd's WithDefaultUnixDevices would also allow
// /dev/console, which a sandbox without a terminal does not need.
func withDevices(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
	if s.Linux.Resources == nil {
		s.Linux.Resources = &specs.LinuxResources{}
	}
	rules := make([]specs.LinuxDeviceCgroup, 0, len(allowedDevices)+1)
	rules = append(rules, specs.LinuxDeviceCgroup{Allow: false, Access: "rwm"})
	for _, d := range allowedDevices {
		major := d.major
		r := specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Access: "rwm"}
		if d.minor >= 0 {
			minor := d.minor
			r.Minor = &minor
		}
		rules = append(rules, r)
	}
	s.Linux.Resources.Devices = rules
	// No extra device nodes beyond runc's defaults.
	s.Linux.Devices = nil
	return nil
}

// withRlimit sets soft and hard limit of one rlimit, replacing an existing
// entry of the same type. containerd 2.2 has no option for it (WithRlimit
// arrives in 2.3).
func withRlimit(typ string, v uint64) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *specs.Spec) error {
		l := specs.POSIXRlimit{Type: typ, Soft: v, Hard: v}
		for i := range s.Process.Rlimits {
			if s.Process.Rlimits[i].Type == typ {
				s.Process.Rlimits[i] = l
				return nil
			}
		}
		s.Process.Rlimits = append(s.Process.Rlimits, l)
		return nil
	}
}

// WithNetNS makes the sandbox join the network namespace pinned at path
// (made and configured by boxd before the task starts) instead of a new
// empty one. The namespace belongs to the host's user namespace, so the
// sandbox's root has no capabilities over it.
//
// The kernel lets sysfs be mounted only by someone with CAP_SYS_ADMIN over
// the network namespace's owner, which the sandbox's user namespace is
// not; runc's fallback would be a bind of the host's /sys. So /sys is an
// empty read-only tmpfs instead.
func WithNetNS(path string) coci.SpecOpts {
	return func(_ context.Context, _ coci.Client, _ *containers.Container, s *coci.Spec) error {
		if s.Linux == nil {
			return errors.New("oci: WithNetNS: spec has no linux section")
		}
		for i, m := range s.Mounts {
			if m.Destination == "/sys" {
				s.Mounts[i] = specs.Mount{Destination: "/sys", Type: "tmpfs", Source: "tmpfs",
					Options: []string{"nosuid", "noexec", "nodev", "ro", "size=4k", "mode=555"}}
			}
		}
		for i, ns := range s.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace {
				s.Linux.Namespaces[i].Path = path
				return nil
			}
		}
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: path})
		return nil
	}
}

// WithResolvConf bind-mounts the host file src read-only at
// /etc/resolv.conf.
func WithResolvConf(src string) coci.SpecOpts {
	return coci.WithMounts([]specs.Mount{{Destination: "/etc/resolv.conf", Type: "bind", Source: src,
		Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"}}})
}
