package oci

// Config is everything the spec depends on: a validated sandbox request merged
// with the daemon's defaults. Spec turns it into a runtime-spec without
// touching the host, so it can be tested field by field.
type Config struct {
	ID       string
	Hostname string
	// Env is the environment of commands (image env, then request env;
	// later entries win). It goes to the init in the hand-off (stored in
	// the InitAnnotation), not into the init's own environment.
	Env     []string
	Workdir string // absolute path inside the sandbox; created by the init

	MemoryBytes int64   // hard limit; swap is set equal so the sandbox cannot swap
	CPUs        float64 // CPU quota in cores (1.5 = 150ms per 100ms period)
	Pids        int64   // pids cgroup limit

	// User namespace: root inside maps to HostUID/HostGID on the host and
	// IDMapSize ids follow it.
	HostUID   uint32
	HostGID   uint32
	IDMapSize uint32

	InitBinary  string // host path of the boxd-init binary, bind-mounted read-only at agent.InitPath
	ChannelDir  string // host directory bind-mounted read-only at agent.ChannelDir (the hand-off socket's)
	CgroupsPath string // e.g. "/boxd/<id>"
	// AgentDir, set for a gVisor sandbox only, is the host directory
	// (the sandbox root's, 0700) bind-mounted read-write at
	// wire.AgentDir, where the init binds the agent socket; the init then
	// runs with wire.GvisorFlag (agent/gvchannel).
	AgentDir string

	// NetNSPath, if set, is a network namespace the sandbox joins instead
	// of a new empty one (network egress); ResolvConf is then the host
	// file bind-mounted read-only at /etc/resolv.conf.
	NetNSPath  string
	ResolvConf string

	ReadOnlyRootfs bool
	TmpSizeBytes   int64 // size cap of the /tmp tmpfs
	ShmSizeBytes   int64 // size cap of /dev/shm; zero means ShmSizeBytes
	// Tmpfs are further tmpfs mounts (nosuid, nodev), each with its size
	// cap; the caller has checked their paths.
	Tmpfs []Tmpfs
	// NoFile, NProc, FSize are rlimits; zero means the package default.
	// CPUTime is RLIMIT_CPU in seconds; zero means none.
	NoFile  uint64
	NProc   uint64
	FSize   uint64
	CPUTime uint64

	// CPUShares is the CPU weight as cgroup v1 shares (runc converts it to
	// cpu.weight on v2); zero keeps the kernel's default. MemoryLow is
	// memory the kernel protects from reclaim (memory.low on v2, the soft
	// limit on v1); zero means none.
	CPUShares uint64
	MemoryLow int64

	// User is who commands run as when a request names nobody; handed to
	// the init, which resolves it in the sandbox's /etc/passwd.
	User string
}

// Tmpfs is one tmpfs mount of a sandbox.
type Tmpfs struct {
	Path      string
	SizeBytes int64
}
