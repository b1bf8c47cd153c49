//go:build linux

// The seccomp profile is only real on Linux (contrib/seccomp returns an empty
// one elsewhere and Spec refuses it), so these tests are Linux-only.

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/containerd/containerd/v2/pkg/kernelversion"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/handoff"
	"github.com/boxd-dev/boxd/agent/wire"
)

const testNS = "boxd-test"

func testCtx() context.Context {
	return namespaces.WithNamespace(context.Background(), testNS)
}

// baseConfig is a minimal valid config: every optional field left at zero.
func baseConfig() Config {
	return Config{
		ID:          "sb-1",
		Env:         []string{"HOME=/root", "LANG=C.UTF-8"},
		Workdir:     "/workspace",
		MemoryBytes: 512 << 20,
		CPUs:        1,
		Pids:        256,
		HostUID:     200000,
		HostGID:     300000,
		IDMapSize:   65536,
		InitBinary:  "/usr/libexec/boxd/boxd-init",
		ChannelDir:  "/run/boxd/sandboxes/sb-1",
		CgroupsPath: "/boxd/sb-1",
	}
}

func mustSpec(t testing.TB, c Config) *specs.Spec {
	t.Helper()
	s, err := Spec(testCtx(), c)
	if err != nil {
		t.Fatalf("Spec: %v", err)
	}
	return s
}

type wantRlimit struct{ soft, hard uint64 }

func TestSpecTable(t *testing.T) {
	longID := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		mutate func(*Config)

		hostname    string
		cgroupsPath string
		readonly    bool
		memory      int64
		quota       int64
		pids        int64
		env         []string
		rlimits     map[string]wantRlimit
		// mount destination → options, for the mounts that depend on the
		// config; every spec must also have the fixed ones.
		tmpOpts       []string
		workspaceOpts []string // nil: no mount at /workspace
	}{
		{
			name:        "defaults",
			mutate:      func(*Config) {},
			hostname:    "sb-1",
			cgroupsPath: "/boxd/sb-1",
			memory:      512 << 20,
			quota:       100000,
			pids:        256,
			env:         []string{DefaultPathEnv, "HOME=/root", "LANG=C.UTF-8"},
			rlimits: map[string]wantRlimit{
				"RLIMIT_CORE":   {0, 0},
				"RLIMIT_NOFILE": {1024, 1024},
				"RLIMIT_NPROC":  {4096, 4096},
				"RLIMIT_FSIZE":  {1 << 30, 1 << 30},
			},
			tmpOpts: []string{"nosuid", "nodev", "mode=1777", "size=67108864"},
		},
		{
			name: "read-only rootfs gets a tmpfs workspace sized like /tmp",
			mutate: func(c *Config) {
				c.ReadOnlyRootfs = true
				c.TmpSizeBytes = 32 << 20
			},
			hostname:    "sb-1",
			cgroupsPath: "/boxd/sb-1",
			readonly:    true,
			memory:      512 << 20,
			quota:       100000,
			pids:        256,
			env:         []string{DefaultPathEnv, "HOME=/root", "LANG=C.UTF-8"},
			rlimits: map[string]wantRlimit{
				"RLIMIT_CORE":   {0, 0},
				"RLIMIT_NOFILE": {1024, 1024},
				"RLIMIT_NPROC":  {4096, 4096},
				"RLIMIT_FSIZE":  {1 << 30, 1 << 30},
			},
			tmpOpts:       []string{"nosuid", "nodev", "mode=1777", "size=33554432"},
			workspaceOpts: []string{"nosuid", "nodev", "mode=755", "size=33554432"},
		},
		{
			name: "fractional cpus, small memory, few pids",
			mutate: func(c *Config) {
				c.CPUs = 0.5
				c.MemoryBytes = 64 << 20
				c.Pids = 16
			},
			hostname:    "sb-1",
			cgroupsPath: "/boxd/sb-1",
			memory:      64 << 20,
			quota:       50000,
			pids:        16,
			env:         []string{DefaultPathEnv, "HOME=/root", "LANG=C.UTF-8"},
			rlimits: map[string]wantRlimit{
				"RLIMIT_CORE":   {0, 0},
				"RLIMIT_NOFILE": {1024, 1024},
				"RLIMIT_NPROC":  {4096, 4096},
				"RLIMIT_FSIZE":  {1 << 30, 1 << 30},
			},
			tmpOpts: []string{"nosuid", "nodev", "mode=1777", "size=67108864"},
		},
		{
			name: "quota is rounded, not truncated",
			mutate: func(c *Config) {
				c.CPUs = 0.3 // 0.3*100000 is 29999.999... in float64
			},
			hostname:    "sb-1",
			cgroupsPath: "/boxd/sb-1",
			memory:      512 << 20,
			quota:       30000,
			pids:        256,
			env:         []string{DefaultPathEnv, "HOME=/root", "LANG=C.UTF-8"},
			rlimits: map[string]wantRlimit{
				"RLIMIT_CORE":   {0, 0},
				"RLIMIT_NOFILE": {1024, 1024},
				"RLIMIT_NPROC":  {4096, 4096},
				"RLIMIT_FSIZE":  {1 << 30, 1 << 30},
			},
			tmpOpts: []string{"nosuid", "nodev", "mode=1777", "size=67108864"},
		},
		{
			name: "big sandbox with rlimit overrides",
			mutate: func(c *Config) {
				c.CPUs = 8
				c.MemoryBytes = 16 << 30
				c.Pids = 32768
				c.NoFile = 65536
				c.NProc = 100
				c.FSize = 10 << 20
			},
			hostname:    "sb-1",
			cgroupsPath: "/boxd/sb-1",
			memory:      16 << 30,
			quota:       800000,
			pids:        32768,
			env:         []string{DefaultPathEnv, "HOME=/root", "LANG=C.UTF-8"},
			rlimits: map[string]wantRlimit{
				"RLIMIT_CORE":   {0, 0},
				"RLIMIT_NOFILE": {65536, 65536},
				"RLIMIT_NPROC":  {100, 100},
				"RLIMIT_FSIZE":  {10 << 20, 10 << 20},
			},
			tmpOpts: []string{"nosuid", "nodev", "mode=1777", "size=67108864"},
		},
		{
			name: "explicit hostname, no cgroups path, env with PATH and duplicates",
			mutate: func(c *Config) {
				c.Hostname = "box"
				c.CgroupsPath = ""
				c.Env = []string{"A=1", "PATH=/opt/bin", "B=2", "A=3", "EMPTY="}
			},
			hostname:    "box",
			cgroupsPath: "/" + testNS + "/sb-1", // containerd's default
			memory:      512 << 20,
			quota:       100000,
			pids:        256,
			env:         []string{"A=3", "PATH=/opt/bin", "B=2", "EMPTY="},
			rlimits: map[string]wantRlimit{
				"RLIMIT_CORE":   {0, 0},
				"RLIMIT_NOFILE": {1024, 1024},
				"RLIMIT_NPROC":  {4096, 4096},
				"RLIMIT_FSIZE":  {1 << 30, 1 << 30},
			},
			tmpOpts: []string{"nosuid", "nodev", "mode=1777", "size=67108864"},
		},
		{
			name: "long id is cut to a hostname, empty env gets PATH",
			mutate: func(c *Config) {
				c.ID = longID
				c.Env = nil
			},
			hostname:    longID[:63],
			cgroupsPath: "/boxd/sb-1",
			memory:      512 << 20,
			quota:       100000,
			pids:        256,
			env:         []string{DefaultPathEnv},
			rlimits: map[string]wantRlimit{
				"RLIMIT_CORE":   {0, 0},
				"RLIMIT_NOFILE": {1024, 1024},
				"RLIMIT_NPROC":  {4096, 4096},
				"RLIMIT_FSIZE":  {1 << 30, 1 << 30},
			},
			tmpOpts: []string{"nosuid", "nodev", "mode=1777", "size=67108864"},
		},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := baseConfig()
			tc.mutate(&c)
			s := mustSpec(t, c)

			checkInvariants(t, c, s)

			if s.Hostname != tc.hostname {
				t.Errorf("Hostname = %q, want %q", s.Hostname, tc.hostname)
			}
			if s.Linux.CgroupsPath != tc.cgroupsPath {
				t.Errorf("CgroupsPath = %q, want %q", s.Linux.CgroupsPath, tc.cgroupsPath)
			}
			if s.Root.Readonly != tc.readonly {
				t.Errorf("Root.Readonly = %v, want %v", s.Root.Readonly, tc.readonly)
			}
			if ic, err := InitConfig(s); err != nil || !slices.Equal(ic.Env, tc.env) {
				t.Errorf("hand-off Env = %q (%v), want %q", ic.Env, err, tc.env)
			}

			r := s.Linux.Resources
			if r.Memory == nil || r.Memory.Limit == nil || *r.Memory.Limit != tc.memory {
				t.Errorf("Memory.Limit = %v, want %d", r.Memory, tc.memory)
			}
			if r.Memory == nil || r.Memory.Swap == nil || *r.Memory.Swap != tc.memory {
				t.Errorf("Memory.Swap = %v, want %d (equal to the limit: no swap)", r.Memory, tc.memory)
			}
			if r.CPU == nil || r.CPU.Quota == nil || *r.CPU.Quota != tc.quota {
				t.Errorf("CPU.Quota = %v, want %d", r.CPU, tc.quota)
			}
			if r.CPU == nil || r.CPU.Period == nil || *r.CPU.Period != 100000 {
				t.Errorf("CPU.Period = %v, want 100000", r.CPU)
			}
			if r.Pids == nil || r.Pids.Limit == nil || *r.Pids.Limit != tc.pids {
				t.Errorf("Pids = %v, want %d", r.Pids, tc.pids)
			}

			got := map[string]wantRlimit{}
			for _, l := range s.Process.Rlimits {
				if _, dup := got[l.Type]; dup {
					t.Errorf("rlimit %s appears twice", l.Type)
				}
				got[l.Type] = wantRlimit{l.Soft, l.Hard}
			}
			for typ, want := range tc.rlimits {
				if g, ok := got[typ]; !ok || g != want {
					t.Errorf("%s = %+v (present %v), want %+v", typ, g, ok, want)
				}
			}
			if len(got) != len(tc.rlimits) {
				t.Errorf("rlimits = %+v, want exactly %+v", got, tc.rlimits)
			}

			m := mountsByDest(t, s)
			if tmp, ok := m["/tmp"]; !ok {
				t.Error("no /tmp mount")
			} else {
				checkMount(t, tmp, "tmpfs", "tmpfs", tc.tmpOpts)
			}
			ws, ok := m["/workspace"]
			switch {
			case tc.workspaceOpts == nil && ok:
				t.Errorf("/workspace is mounted (%+v); with a writable rootfs it must live in the rootfs", ws)
			case tc.workspaceOpts != nil && !ok:
				t.Error("read-only rootfs but no /workspace tmpfs")
			case tc.workspaceOpts != nil:
				checkMount(t, ws, "tmpfs", "tmpfs", tc.workspaceOpts)
			}

			if _, err := json.Marshal(s); err != nil {
				t.Errorf("spec does not marshal: %v", err)
			}
		})
	}
}

// checkInvariants asserts what every sandbox gets whatever its config.
func checkInvariants(t *testing.T, c Config, s *specs.Spec) {
	t.Helper()
	if s.Process == nil || s.Linux == nil || s.Root == nil {
		t.Fatalf("spec lacks Process, Linux or Root: %+v", s)
	}
	p := s.Process
	if !slices.Equal(p.Args, []string{wire.InitPath}) {
		t.Errorf("Args = %q, want [%q]", p.Args, wire.InitPath)
	}
	if p.User.UID != 0 || p.User.GID != 0 {
		t.Errorf("User = %d:%d, want 0:0", p.User.UID, p.User.GID)
	}
	if p.Cwd != "/" {
		t.Errorf("Cwd = %q, want /", p.Cwd)
	}
	if p.Terminal {
		t.Error("Terminal = true")
	}
	if !p.NoNewPrivileges {
		t.Error("NoNewPrivileges = false")
	}
	if p.OOMScoreAdj == nil || *p.OOMScoreAdj != 500 {
		t.Errorf("OOMScoreAdj = %v, want the init's 500", p.OOMScoreAdj)
	}
	// The init's own environment is fixed: nothing from the image or the
	// request reaches it.
	if !slices.Equal(p.Env, []string{DefaultPathEnv}) {
		t.Errorf("init's Env = %q, want only %q", p.Env, DefaultPathEnv)
	}
	ic, err := InitConfig(s)
	if err != nil {
		t.Errorf("hand-off config: %v", err)
	}
	if n := envCount(ic.Env, "PATH"); n != 1 {
		t.Errorf("PATH appears %d times in %q", n, ic.Env)
	}
	if ic.Workdir != c.Workdir || ic.Pids != c.Pids {
		t.Errorf("hand-off config workdir %q pids %d, want %q %d", ic.Workdir, ic.Pids, c.Workdir, c.Pids)
	}

	if s.Root.Path != "rootfs" {
		t.Errorf("Root.Path = %q, want rootfs", s.Root.Path)
	}
	if s.Linux.RootfsPropagation != "rprivate" {
		t.Errorf("RootfsPropagation = %q, want rprivate", s.Linux.RootfsPropagation)
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Errorf("seccomp missing or not default-deny: %+v", s.Linux.Seccomp)
	}
	if s.Linux.Resources == nil || s.Linux.Resources.Memory == nil || s.Linux.Resources.CPU == nil || s.Linux.Resources.Pids == nil {
		t.Errorf("a cgroup limit is missing: %+v", s.Linux.Resources)
	}

	wantUID := []specs.LinuxIDMapping{{ContainerID: 0, HostID: c.HostUID, Size: c.IDMapSize}}
	wantGID := []specs.LinuxIDMapping{{ContainerID: 0, HostID: c.HostGID, Size: c.IDMapSize}}
	if !slices.Equal(s.Linux.UIDMappings, wantUID) {
		t.Errorf("UIDMappings = %+v, want %+v", s.Linux.UIDMappings, wantUID)
	}
	if !slices.Equal(s.Linux.GIDMappings, wantGID) {
		t.Errorf("GIDMappings = %+v, want %+v", s.Linux.GIDMappings, wantGID)
	}

	m := mountsByDest(t, s)
	init, ok := m[wire.InitPath]
	if !ok {
		t.Errorf("no mount at %s", wire.InitPath)
	} else {
		checkMount(t, init, "bind", c.InitBinary, []string{"rbind", "ro", "nosuid", "nodev"})
	}
	ch, ok := m[wire.ChannelDir]
	if !ok {
		t.Errorf("no mount at %s", wire.ChannelDir)
	} else {
		// Read-only: the sandbox must not be able to change what boxd
		// offers there.
		checkMount(t, ch, "bind", c.ChannelDir, []string{"rbind", "ro", "nosuid", "nodev", "noexec"})
	}
	for _, dest := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/hostname"} {
		if _, ok := m[dest]; ok {
			t.Errorf("%s is mounted; nothing from the host may be", dest)
		}
	}
}

func envCount(env []string, key string) int {
	n := 0
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			n++
		}
	}
	return n
}

func mountsByDest(t *testing.T, s *specs.Spec) map[string]specs.Mount {
	t.Helper()
	m := make(map[string]specs.Mount, len(s.Mounts))
	for _, mnt := range s.Mounts {
		if _, dup := m[mnt.Destination]; dup {
			t.Errorf("two mounts at %s", mnt.Destination)
		}
		m[mnt.Destination] = mnt
	}
	return m
}

// checkMount compares options as a set: order carries no meaning for runc.
func checkMount(t *testing.T, m specs.Mount, typ, source string, opts []string) {
	t.Helper()
	if m.Type != typ || m.Source != source {
		t.Errorf("mount %s: type %q source %q, want %q %q", m.Destination, m.Type, m.Source, typ, source)
	}
	got := slices.Sorted(slices.Values(m.Options))
	want := slices.Sorted(slices.Values(opts))
	if !slices.Equal(got, want) {
		t.Errorf("mount %s: options %q, want %q", m.Destination, m.Options, opts)
	}
}

func TestSpecMounts(t *testing.T) {
	for _, ro := range []bool{false, true} {
		c := baseConfig()
		c.ReadOnlyRootfs = ro
		s := mustSpec(t, c)

		// The exact list: a new default mount in a containerd upgrade must be
		// looked at, not slip in.
		want := []string{"/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/mqueue", "/sys", "/run", "/tmp"}
		if ro {
			want = append(want, "/workspace")
		}
		want = append(want, wire.InitPath, wire.ChannelDir)
		var got []string
		for _, m := range s.Mounts {
			got = append(got, m.Destination)
		}
		if !slices.Equal(got, want) {
			t.Errorf("ro=%v: mount destinations %q, want %q", ro, got, want)
		}

		pseudo := map[string]bool{"proc": true, "tmpfs": true, "devpts": true, "mqueue": true, "sysfs": true}
		hostSources := map[string]string{wire.InitPath: c.InitBinary, wire.ChannelDir: c.ChannelDir}
		m := mountsByDest(t, s)
		for _, mnt := range s.Mounts {
			isBind := mnt.Type == "bind" || slices.Contains(mnt.Options, "bind") || slices.Contains(mnt.Options, "rbind")
			if isBind {
				if src, ok := hostSources[mnt.Destination]; !ok || mnt.Source != src {
					t.Errorf("ro=%v: unexpected host bind mount %+v", ro, mnt)
				}
				continue
			}
			if !pseudo[mnt.Type] {
				t.Errorf("ro=%v: mount %s has type %q, not a pseudo-filesystem", ro, mnt.Destination, mnt.Type)
			}
			if strings.HasPrefix(mnt.Source, "/") {
				t.Errorf("ro=%v: mount %s has a host path source %q", ro, mnt.Destination, mnt.Source)
			}
			if !slices.Contains(mnt.Options, "nosuid") {
				t.Errorf("ro=%v: mount %s lacks nosuid: %q", ro, mnt.Destination, mnt.Options)
			}
		}

		checkMount(t, m["/proc"], "proc", "proc", []string{"nosuid", "noexec", "nodev"})
		checkMount(t, m["/sys"], "sysfs", "sysfs", []string{"nosuid", "noexec", "nodev", "ro"})
		checkMount(t, m["/dev/shm"], "tmpfs", "shm", []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"})
		checkMount(t, m["/dev/mqueue"], "mqueue", "mqueue", []string{"nosuid", "noexec", "nodev"})
		checkMount(t, m["/run"], "tmpfs", "tmpfs", []string{"nosuid", "nodev", "strictatime", "mode=755", "size=65536k"})
		checkMount(t, m["/dev"], "tmpfs", "tmpfs", []string{"nosuid", "strictatime", "mode=755", "size=65536k"})
		checkMount(t, m["/dev/pts"], "devpts", "devpts", []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"})
	}
}

// TestSpecGvisorAgentDir: only a gVisor sandbox's spec has the agent
// directory, read-write but nosuid, nodev and noexec, and an init told so;
// a runc sandbox's has neither (TestSpecMounts).
func TestSpecGvisorAgentDir(t *testing.T) {
	c := baseConfig()
	if s := mustSpec(t, c); !slices.Equal(s.Process.Args, []string{wire.InitPath}) {
		t.Errorf("runc init args %q", s.Process.Args)
	}
	c.AgentDir = "/var/lib/boxd/sandboxes/x/g"
	s := mustSpec(t, c)
	if !slices.Equal(s.Process.Args, []string{wire.InitPath, wire.GvisorFlag}) {
		t.Errorf("gvisor init args %q", s.Process.Args)
	}
	// The host sees one gVisor sandbox process: it keeps the commands' score.
	if p := s.Process.OOMScoreAdj; p == nil || *p != wire.CommandOOMScoreAdj {
		t.Errorf("gvisor OOMScoreAdj = %v, want %d", p, wire.CommandOOMScoreAdj)
	}
	m := mountsByDest(t, s)[wire.AgentDir]
	if m.Source != c.AgentDir || m.Type != "bind" {
		t.Fatalf("agent dir mount %+v", m)
	}
	for _, o := range []string{"rw", "nosuid", "nodev", "noexec"} {
		if !slices.Contains(m.Options, o) {
			t.Errorf("agent dir mount options %q lack %s", m.Options, o)
		}
	}
	c.AgentDir = "relative"
	if _, err := Spec(context.Background(), c); err == nil {
		t.Error("a relative AgentDir was accepted")
	}
}

func TestSpecCapabilities(t *testing.T) {
	s := mustSpec(t, baseConfig())
	caps := s.Process.Capabilities
	if caps == nil {
		t.Fatal("no capabilities section")
	}
	want := []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
	}
	slices.Sort(want)
	sets := map[string][]string{
		"bounding":  caps.Bounding,
		"effective": caps.Effective,
		"permitted": caps.Permitted,
	}
	for name, set := range sets {
		if got := slices.Sorted(slices.Values(set)); !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if len(caps.Inheritable) != 0 {
		t.Errorf("inheritable = %q, want empty", caps.Inheritable)
	}
	if len(caps.Ambient) != 0 {
		t.Errorf("ambient = %q, want empty", caps.Ambient)
	}

	forbidden := []string{
		"CAP_NET_RAW", "CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SYS_ADMIN", "CAP_SYS_PTRACE",
		// Not named in the design but equally out: containerd's default
		// set has SETFCAP, and the others open kernel surfaces.
		"CAP_SETFCAP", "CAP_NET_ADMIN", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_DAC_READ_SEARCH",
		"CAP_BPF", "CAP_PERFMON", "CAP_SYS_BOOT", "CAP_SYS_TIME", "CAP_SYSLOG",
	}
	for _, f := range forbidden {
		for name, set := range map[string][]string{
			"bounding": caps.Bounding, "effective": caps.Effective, "permitted": caps.Permitted,
			"inheritable": caps.Inheritable, "ambient": caps.Ambient,
		} {
			if slices.Contains(set, f) {
				t.Errorf("%s has forbidden %s", name, f)
			}
		}
	}

	// Mutating one spec must not leak into the next one.
	caps.Bounding[0] = "CAP_SYS_ADMIN"
	s2 := mustSpec(t, baseConfig())
	if slices.Contains(s2.Process.Capabilities.Bounding, "CAP_SYS_ADMIN") ||
		slices.Contains(s2.Process.Capabilities.Effective, "CAP_SYS_ADMIN") {
		t.Error("a spec shares its capability slices with the package defaults")
	}
	if slices.Contains(DefaultCapabilities(), "CAP_SYS_ADMIN") {
		t.Error("DefaultCapabilities was changed through a spec")
	}
}

// seccompAllows reports whether name is in an allow rule, and whether any such
// rule is unconditional (no argument filter).
func seccompAllows(sc *specs.LinuxSeccomp, name string) (allowed, unconditional bool) {
	for _, r := range sc.Syscalls {
		if r.Action != specs.ActAllow || !slices.Contains(r.Names, name) {
			continue
		}
		allowed = true
		if len(r.Args) == 0 {
			unconditional = true
		}
	}
	return allowed, unconditional
}

func TestSpecSeccomp(t *testing.T) {
	s := mustSpec(t, baseConfig())
	sc := s.Linux.Seccomp
	if sc == nil {
		t.Fatal("no seccomp profile")
	}
	if sc.DefaultAction != specs.ActErrno {
		t.Errorf("DefaultAction = %q, want %q", sc.DefaultAction, specs.ActErrno)
	}
	if len(sc.Architectures) == 0 {
		t.Error("no architectures: the profile would not cover 32-bit syscall entry points")
	}

	for _, name := range []string{"read", "write", "execve", "openat", "exit_group", "wait4"} {
		if _, uncond := seccompAllows(sc, name); !uncond {
			t.Errorf("%s is not allowed unconditionally", name)
		}
	}
	// CAP_SYS_CHROOT is in the set, so the profile opens chroot.
	if _, uncond := seccompAllows(sc, "chroot"); !uncond {
		t.Error("chroot not allowed although CAP_SYS_CHROOT is granted")
	}

	// Opened only by CAP_SYS_ADMIN, CAP_BPF, CAP_SYS_MODULE and friends, or
	// never: with this capability set they must fall to the default errno.
	for _, name := range []string{
		"bpf", "mount", "umount2", "unshare", "setns", "keyctl", "add_key", "request_key",
		"open_by_handle_at", "init_module", "finit_module", "kexec_load", "reboot",
		"perf_event_open", "fsopen", "open_tree", "move_mount", "pivot_root", "sethostname",
		"kcmp", "pidfd_getfd", "userfaultfd", "io_uring_setup",
	} {
		if allowed, _ := seccompAllows(sc, name); allowed {
			t.Errorf("%s is allowed", name)
		}
	}

	// clone is allowed only with a mask that refuses namespace flags, and
	// clone3 (whose flags seccomp cannot see) returns ENOSYS so libcs fall
	// back to clone.
	allowed, uncond := seccompAllows(sc, "clone")
	if !allowed || uncond {
		t.Errorf("clone: allowed=%v unconditional=%v, want allowed only with an argument filter", allowed, uncond)
	}
	nsFlags := uint64(unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
		unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP)
	for _, r := range sc.Syscalls {
		if r.Action != specs.ActAllow || !slices.Contains(r.Names, "clone") {
			continue
		}
		if len(r.Args) != 1 || r.Args[0].Op != specs.OpMaskedEqual || r.Args[0].Value != nsFlags || r.Args[0].ValueTwo != 0 {
			t.Errorf("clone rule %+v does not mask out namespace flags", r.Args)
		}
	}
	if allowed, _ := seccompAllows(sc, "clone3"); allowed {
		t.Error("clone3 is allowed")
	}
	var clone3ENOSYS bool
	for _, r := range sc.Syscalls {
		if slices.Contains(r.Names, "clone3") && r.Action == specs.ActErrno && r.ErrnoRet != nil && *r.ErrnoRet == uint(unix.ENOSYS) {
			clone3ENOSYS = true
		}
	}
	if !clone3ENOSYS {
		t.Error("clone3 does not return ENOSYS")
	}

	// socket is allowed only through argument filters (AF_ALG and AF_VSOCK
	// fall to the default).
	if allowed, uncond := seccompAllows(sc, "socket"); !allowed || uncond {
		t.Errorf("socket: allowed=%v unconditional=%v, want allowed only with argument filters", allowed, uncond)
	}

	// containerd's profile, like Docker's, allows ptrace on kernels >= 4.8,
	// where seccomp is re-checked after a tracer changes a syscall. It only
	// reaches processes in the sandbox's own pid namespace; without
	// CAP_SYS_PTRACE the kernel's own checks apply (same uid, dumpable).
	// process_vm_* come with it; kcmp and pidfd_getfd still need the cap.
	newKernel, err := kernelversion.GreaterEqualThan(kernelversion.KernelVersion{Kernel: 4, Major: 8})
	if err != nil {
		t.Fatalf("kernel version: %v", err)
	}
	for _, name := range []string{"ptrace", "process_vm_readv", "process_vm_writev"} {
		if _, uncond := seccompAllows(sc, name); uncond != newKernel {
			t.Errorf("%s allowed=%v, want %v on this kernel", name, uncond, newKernel)
		}
	}
}

// The profile opens syscalls by bounding set, so it must be the one computed
// from the final capabilities. With today's set containerd's defaults would
// yield the same profile, so this guards future loosenings (an added
// CAP_SYS_PTRACE must open ptrace's siblings) rather than the current order.
func TestSpecSeccompMatchesFinalCaps(t *testing.T) {
	s := mustSpec(t, baseConfig())
	want := seccomp.DefaultProfile(s)
	DenySyscalls(want, DeniedSyscalls)
	if !reflect.DeepEqual(s.Linux.Seccomp, want) {
		t.Error("seccomp profile differs from the default profile for the spec's final capabilities plus boxd's denials")
	}
}

func TestSpecNamespaces(t *testing.T) {
	s := mustSpec(t, baseConfig())
	want := []specs.LinuxNamespaceType{
		specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace,
		specs.NetworkNamespace, specs.UserNamespace, specs.CgroupNamespace,
	}
	var got []specs.LinuxNamespaceType
	for _, ns := range s.Linux.Namespaces {
		// A path means joining an existing namespace: the host's, or another
		// sandbox's.
		if ns.Path != "" {
			t.Errorf("namespace %s has path %q", ns.Type, ns.Path)
		}
		got = append(got, ns.Type)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("namespaces = %q, want %q", got, want)
	}
}

func TestSpecPaths(t *testing.T) {
	s := mustSpec(t, baseConfig())
	masked := []string{
		"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/sys/firmware",
		"/proc/scsi", "/proc/acpi", "/sys/devices/virtual/powercap",
		"/proc/asound", "/proc/interrupts", "/proc/latency_stats", "/proc/timer_stats",
	}
	for _, p := range masked {
		if !slices.Contains(s.Linux.MaskedPaths, p) {
			t.Errorf("%s is not masked", p)
		}
	}
	for _, p := range []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"} {
		if !slices.Contains(s.Linux.ReadonlyPaths, p) {
			t.Errorf("%s is not read-only", p)
		}
	}
	for name, list := range map[string][]string{"masked": s.Linux.MaskedPaths, "readonly": s.Linux.ReadonlyPaths} {
		if len(slices.Compact(slices.Sorted(slices.Values(list)))) != len(list) {
			t.Errorf("%s paths have duplicates: %q", name, list)
		}
	}
}

func TestSpecDevices(t *testing.T) {
	s := mustSpec(t, baseConfig())
	if len(s.Linux.Devices) != 0 {
		t.Errorf("extra device nodes: %+v", s.Linux.Devices)
	}
	rules := s.Linux.Resources.Devices
	if len(rules) == 0 {
		t.Fatal("no device cgroup rules")
	}
	first := rules[0]
	if first.Allow || first.Type != "" && first.Type != "a" || first.Major != nil || first.Minor != nil || first.Access != "rwm" {
		t.Errorf("first rule %+v is not deny-all", first)
	}
	type dev struct {
		major, minor int64 // minor -1: wildcard
	}
	want := map[dev]string{
		{1, 3}: "null", {1, 5}: "zero", {1, 7}: "full", {1, 8}: "random", {1, 9}: "urandom",
		{5, 0}: "tty", {5, 2}: "ptmx", {136, -1}: "pts",
	}
	got := map[dev]bool{}
	for _, r := range rules[1:] {
		if !r.Allow {
			t.Errorf("unexpected deny rule after deny-all: %+v", r)
			continue
		}
		if r.Type != "c" || r.Major == nil {
			t.Errorf("allow rule %+v is not for one character device major", r)
			continue
		}
		d := dev{*r.Major, -1}
		if r.Minor != nil {
			d.minor = *r.Minor
		}
		if _, ok := want[d]; !ok {
			t.Errorf("device %d:%d is allowed", d.major, d.minor)
		}
		got[d] = true
	}
	for d, name := range want {
		if !got[d] {
			t.Errorf("%s (%d:%d) is not allowed", name, d.major, d.minor)
		}
	}
}

func TestSpecErrors(t *testing.T) {
	tests := []struct {
		field  string
		mutate func(*Config)
	}{
		{"ID", func(c *Config) { c.ID = "" }},
		{"Hostname", func(c *Config) { c.Hostname = strings.Repeat("h", 65) }},
		{"Workdir", func(c *Config) { c.Workdir = "workspace" }},
		{"MemoryBytes", func(c *Config) { c.MemoryBytes = 0 }},
		{"MemoryBytes", func(c *Config) { c.MemoryBytes = -1 }},
		{"CPUs", func(c *Config) { c.CPUs = 0 }},
		{"CPUs", func(c *Config) { c.CPUs = -2 }},
		{"CPUs", func(c *Config) { c.CPUs = math.NaN() }},
		{"CPUs", func(c *Config) { c.CPUs = math.Inf(1) }},
		{"CPUs", func(c *Config) { c.CPUs = 0.001 }},
		{"Pids", func(c *Config) { c.Pids = 0 }},
		{"Pids", func(c *Config) { c.Pids = -1 }},
		{"IDMapSize", func(c *Config) { c.IDMapSize = 0 }},
		{"IDMapSize", func(c *Config) { c.HostUID = math.MaxUint32 - 10 }},
		{"IDMapSize", func(c *Config) { c.HostGID = math.MaxUint32 - 65535 }},
		{"HostUID", func(c *Config) { c.HostUID = 0 }},
		{"HostGID", func(c *Config) { c.HostGID = 0 }},
		{"InitBinary", func(c *Config) { c.InitBinary = "" }},
		{"InitBinary", func(c *Config) { c.InitBinary = "bin/boxd-init" }},
		{"ChannelDir", func(c *Config) { c.ChannelDir = "" }},
		{"ChannelDir", func(c *Config) { c.ChannelDir = "run/boxd" }},
		{"TmpSizeBytes", func(c *Config) { c.TmpSizeBytes = -1 }},
		{"Env[1]", func(c *Config) { c.Env = []string{"A=1", "NOEQUALS"} }},
		{"Env[0]", func(c *Config) { c.Env = []string{"=value"} }},
		{"Env[2]", func(c *Config) { c.Env = []string{"A=1", "B=2", "C=x\x00y"} }},
		// More than the init's hand-off carries.
		{"Env", func(c *Config) { c.Env = []string{"A=" + strings.Repeat("x", handoff.MaxConfigBytes)} }},
	}
	for _, tc := range tests {
		c := baseConfig()
		tc.mutate(&c)
		s, err := Spec(testCtx(), c)
		if err == nil {
			t.Errorf("%s: no error (spec %+v)", tc.field, s.Process)
			continue
		}
		if s != nil {
			t.Errorf("%s: a spec came back with the error", tc.field)
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: error %v is not a *FieldError", tc.field, err)
			continue
		}
		if fe.Field != tc.field {
			t.Errorf("error names field %q, want %q (%v)", fe.Field, tc.field, err)
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
	}

	// Boundaries that are valid.
	for name, mutate := range map[string]func(*Config){
		"smallest quota":    func(c *Config) { c.CPUs = 0.01 },
		"uid range to top":  func(c *Config) { c.HostUID = math.MaxUint32 - 65536 },
		"hostname of 64":    func(c *Config) { c.Hostname = strings.Repeat("h", 64) },
		"empty workdir":     func(c *Config) { c.Workdir = "" },
		"one-id userns map": func(c *Config) { c.IDMapSize = 1 },
	} {
		c := baseConfig()
		mutate(&c)
		if _, err := Spec(testCtx(), c); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestSpecNeedsNamespace(t *testing.T) {
	_, err := Spec(context.Background(), baseConfig())
	if err == nil {
		t.Fatal("no error without a containerd namespace on the context")
	}
	if !strings.Contains(err.Error(), "sb-1") {
		t.Errorf("error %q does not say which sandbox", err)
	}
}

func TestSpecDoesNotModifyInput(t *testing.T) {
	c := baseConfig()
	c.Env = []string{"A=1", "A=2"}
	_ = mustSpec(t, c)
	if !slices.Equal(c.Env, []string{"A=1", "A=2"}) {
		t.Errorf("Spec changed the caller's Env to %q", c.Env)
	}
}

func BenchmarkSpec(b *testing.B) {
	ctx := testCtx()
	c := baseConfig()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Spec(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSpecNetNS: an egress sandbox joins boxd's pinned namespace (and no
// other), gets /sys as an empty read-only tmpfs rather than sysfs (which
// it could not mount, and runc would replace with the host's), and boxd's
// resolv.conf read-only.
func TestSpecNetNS(t *testing.T) {
	c := baseConfig()
	c.NetNSPath, c.ResolvConf = "/var/lib/boxd/network/netns/abc", "/var/lib/boxd/sandboxes/abc/resolv.conf"
	s := mustSpec(t, c)
	for _, ns := range s.Linux.Namespaces {
		switch {
		case ns.Type == specs.NetworkNamespace && ns.Path != c.NetNSPath:
			t.Errorf("network namespace path = %q, want %q", ns.Path, c.NetNSPath)
		case ns.Type != specs.NetworkNamespace && ns.Path != "":
			t.Errorf("namespace %s has path %q", ns.Type, ns.Path)
		}
	}
	var sys, resolv *specs.Mount
	for i, m := range s.Mounts {
		switch m.Destination {
		case "/sys":
			sys = &s.Mounts[i]
		case "/etc/resolv.conf":
			resolv = &s.Mounts[i]
		}
	}
	if sys == nil || sys.Type != "tmpfs" || !slices.Contains(sys.Options, "ro") {
		t.Errorf("/sys = %+v, want a read-only tmpfs", sys)
	}
	if resolv == nil || resolv.Source != c.ResolvConf || !slices.Contains(resolv.Options, "ro") {
		t.Errorf("/etc/resolv.conf = %+v, want a read-only bind of %s", resolv, c.ResolvConf)
	}
	c.NetNSPath = "relative"
	if _, err := Spec(testCtx(), c); err == nil {
		t.Error("a relative NetNSPath was accepted")
	}
}

// TestSpecDeniedSyscalls: every name boxd denies is in no allow rule and is
// refused with EPERM by an explicit rule, even when the capability set
// would open it (CAP_SYS_ADMIN opens mount, unshare, setns, bpf and more in
// containerd's profile).
func TestSpecDeniedSyscalls(t *testing.T) {
	s := mustSpec(t, baseConfig())
	wide := seccomp.DefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
		Bounding: []string{"CAP_SYS_ADMIN", "CAP_SYS_MODULE", "CAP_SYS_BOOT", "CAP_SYSLOG", "CAP_SYS_TIME", "CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_SYS_RAWIO", "CAP_DAC_READ_SEARCH", "CAP_SYS_PACCT"},
	}}})
	DenySyscalls(wide, DeniedSyscalls)
	for name, sc := range map[string]*specs.LinuxSeccomp{"sandbox": s.Linux.Seccomp, "all capabilities": wide} {
		for _, sys := range DeniedSyscalls {
			if allowed, _ := seccompAllows(sc, sys); allowed {
				t.Errorf("%s profile: %s is allowed", name, sys)
			}
			var eperm bool
			for _, r := range sc.Syscalls {
				if slices.Contains(r.Names, sys) && r.Action == specs.ActErrno && r.ErrnoRet != nil && *r.ErrnoRet == uint(unix.EPERM) {
					eperm = true
				}
			}
			if !eperm {
				t.Errorf("%s profile: %s has no explicit EPERM rule", name, sys)
			}
		}
	}
	// Sanity: the wide profile did open some of them before the denial, so
	// the test above can fail.
	before := seccomp.DefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_SYS_ADMIN"}}}})
	if allowed, _ := seccompAllows(before, "mount"); !allowed {
		t.Fatal("containerd's profile with CAP_SYS_ADMIN does not open mount: the denial test proves nothing")
	}
}
