// Package wire is what both ends of the channel between boxd on the host
// and boxd-init, the PID 1 that boxd places inside every sandbox, agree
// on: the frames, the operations and their argument and result types, the
// error codes, and the paths inside the sandbox. The init's side is
// agent/insandbox, boxd's is agent/host, and agent/handoff is how the init
// gets the channel at start.
package wire

import "time"

// Paths inside the sandbox where boxd mounts the init binary and the
// channel directory. The channel directory is a read-only mount of a
// host-root directory (0711) in which boxd offers the init its listener
// while the init starts (agent/handoff); the agent socket itself,
// SocketName, lives only on the host, in a directory the sandbox never sees.
// A gVisor sandbox's init instead binds it in AgentDir (agent/gvchannel).
const (
	InitPath           = "/.boxd/init"
	ChannelDir         = "/.boxd/run"
	AgentDir           = "/.boxd/agent"
	GvisorFlag         = "--gvisor" // the init's argument in a gVisor sandbox
	SocketName         = "agent.sock"
	ExitTimeout        = 124      // exit code reported when a command hits its timeout
	ExitNotFound       = 127      // exit code reported when the command does not exist
	ExitNotExec        = 126      // exit code reported when the command cannot be executed
	DefaultOutputLimit = 16 << 20 // bytes of stdout+stderr kept per exec unless the caller asks otherwise
)

// oom_score_adj of a sandbox's processes: both above anything on the host,
// so a sandbox dies before the host's processes do, and commands above the
// init, so that a sandbox filling its memory limit loses the command that
// filled it rather than its init (at equal scores the kernel picks by size
// alone, and the init can be the largest process). The init runs at
// InitOOMScoreAdj and starts every command at CommandOOMScoreAdj.
const (
	InitOOMScoreAdj    = 500
	CommandOOMScoreAdj = 1000
)

// ExecRequest describes one command to run inside the sandbox.
type ExecRequest struct {
	Args        []string      `json:"args"`
	Env         []string      `json:"env,omitempty"` // K=V, appended to the sandbox's base env (later wins)
	Dir         string        `json:"dir,omitempty"` // working directory; default is the sandbox's workdir
	Timeout     time.Duration `json:"timeout,omitempty"`
	Stdin       []byte        `json:"stdin,omitempty"`
	OutputLimit int64         `json:"output_limit,omitempty"` // 0 means DefaultOutputLimit
	// StdinStream says stdin frames follow the request (after Stdin) until a
	// stdin-close frame. Without it stdin is closed right after Stdin.
	StdinStream bool `json:"stdin_stream,omitempty"`
	// User runs the command as NAME, UID, NAME:GROUP or UID:GID, resolved
	// in the sandbox's /etc/passwd and /etc/group with docker's rules.
	// Empty means the sandbox's default user (its create --user, else the
	// image's USER, else root).
	User string `json:"user,omitempty"`
	// Combined gives the command one pipe for stdout and stderr (as 2>&1
	// does), so its output arrives as stdout frames in the order it was
	// written.
	Combined bool `json:"combined,omitempty"`
	// ReportStart asks for a started frame with the command's pid before
	// any output, sent as soon as it runs.
	ReportStart bool `json:"report_start,omitempty"`
}

// ExecResult is the final state of a command.
type ExecResult struct {
	ExitCode  int           `json:"exit_code"`
	Signal    string        `json:"signal,omitempty"` // e.g. "SIGKILL" when the process died of a signal
	TimedOut  bool          `json:"timed_out,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
	Started   time.Time     `json:"started"`
	Ended     time.Time     `json:"ended"`
	UserCPU   time.Duration `json:"user_cpu"`
	SystemCPU time.Duration `json:"system_cpu"`
	MaxRSS    int64         `json:"max_rss"` // bytes
	// ReadBytes and WriteBytes are the storage I/O of the command and the
	// children it waited for (getrusage's blocks in and out, 512 bytes
	// each): what reached or came from a block device, not the page cache.
	ReadBytes  int64 `json:"read_bytes,omitempty"`
	WriteBytes int64 `json:"write_bytes,omitempty"`
	// PID is the command's process id in the sandbox's pid namespace.
	PID int `json:"pid,omitempty"`
	// Lifetime is the command's process from the init's fork to its
	// reaping, as the init measured it: fork and exec included, boxd's
	// channel and the init's pipes and reply not. An exec's round trip
	// minus this is what boxd adds.
	Lifetime time.Duration `json:"lifetime,omitempty"`
	// OOMKilled is set by boxd, not the init: the command died of SIGKILL
	// and the kernel's OOM killer killed a process of the sandbox while it
	// ran (the cgroup's oom_kill counter went up).
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Kept is the channel's, not the command's: the init will read another
	// request on this connection (it was asked to keep it, Request.Keep,
	// and could). The host client reuses a connection only then, and
	// clears the field before the result goes further.
	Kept bool `json:"kept,omitempty"`
}
