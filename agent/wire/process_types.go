package wire

// Process and session operations. Wire protocol, in the notation of
// protocol.go (all JSON payloads are the types below):
//
//	process-exec:   -> request{args: ProcessSpec} (stdin | stdin-close | procControl)*
//	                                 <- (stdout | stderr)* (result(ExecResult) | error)
//	process-start:  -> request{args: ProcessSpec}
//	                                 <- result(ProcessInfo) | error
//	process-attach: -> request{args: AttachArgs} (stdin | stdin-close | procControl)*
//	                                 <- result(ProcessInfo) (stdout | stderr)*
//	                                    (result(ExecResult) | ok | error)
//	process-list:   -> request       <- result([]ProcessInfo)
//	process-wait:   -> request{args: ProcessRef}
//	                                 <- result(ProcessInfo) | error
//	process-signal: -> request{args: SignalArgs}
//	                                 <- result(ProcessInfo) | error
//	session-create: -> request{args: SessionSpec}
//	                                 <- result(SessionInfo) | error
//	session-list:   -> request       <- result([]SessionInfo)
//	session-remove: -> request{args: SessionRef}
//	                                 <- ok | error
//	session-exec:   -> request{args: SessionCommand}
//	                                 <- (stdout | stderr)* (result(SessionResult) | error)
//
// A procControl frame is a request frame sent during an operation: a Request
// whose op is "resize" (args WindowSize) or "signal" (args SignalArgs, id
// ignored). Attach ends with ok instead of a result when it was asked not to
// follow a process that is still running. Closing the connection of a
// process-exec or session-exec kills what it runs; closing any other
// operation's connection leaves background processes running.

import "time"

// Operation names of the process and session features.
const (
	OpProcessExec   = "process-exec"
	OpProcessStart  = "process-start"
	OpProcessAttach = "process-attach"
	OpProcessList   = "process-list"
	OpProcessWait   = "process-wait"
	OpProcessSignal = "process-signal"
	OpSessionCreate = "session-create"
	OpSessionList   = "session-list"
	OpSessionRemove = "session-remove"
	OpSessionExec   = "session-exec"

	// Control requests, sent as request frames inside process-exec and
	// process-attach.
	CtlResize = "resize"
	CtlSignal = "signal"
)

// Limits of the process table and sessions the init keeps. Everything the
// init buffers lives in the sandbox's memory cgroup.
const (
	// ProcessLogBytes is how much of each output stream of a background
	// process the init keeps for attach (the most recent bytes).
	ProcessLogBytes = 1 << 20
	// MaxProcesses bounds the background processes the init remembers,
	// running or exited. Starting one more evicts the oldest exited one;
	// if all are running the start fails.
	MaxProcesses = 64
	// MaxSessions bounds the sessions of one sandbox.
	MaxSessions = 16
	// MaxSessionCommand bounds one session command's text.
	MaxSessionCommand = 256 << 10
	// MaxWindowDim bounds a terminal's rows and columns.
	MaxWindowDim = 4096
	// NoOutputLimit is an output limit no stream reaches, for interactive
	// terminals whose output is streamed, never buffered. It leaves room
	// for the client's slack without overflowing.
	NoOutputLimit = 1 << 62
)

// Process states in ProcessInfo.
const (
	StateRunning = "running"
	StateExited  = "exited"
)

// ProcessSpec is a command for process-exec and process-start: an exec
// request plus what only these operations offer.
type ProcessSpec struct {
	ExecRequest // its User names the user the command runs as
	// Tty gives the command a new pseudo-terminal as stdin, stdout, stderr
	// and controlling terminal; all output arrives as stdout.
	Tty    bool        `json:"tty,omitempty"`
	Window *WindowSize `json:"window,omitempty"` // initial size with Tty; default 24x80
}

// WindowSize is a terminal's size in characters.
type WindowSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// ProcessInfo describes a background process.
type ProcessInfo struct {
	ID        string      `json:"id"`
	PID       int         `json:"pid"` // in the sandbox's pid namespace
	Args      []string    `json:"args"`
	User      string      `json:"user,omitempty"`
	Tty       bool        `json:"tty,omitempty"`
	StdinOpen bool        `json:"stdin_open,omitempty"`
	State     string      `json:"state"`
	Started   time.Time   `json:"started"`
	Result    *ExecResult `json:"result,omitempty"` // once exited
}

// ProcessRef names a background process.
type ProcessRef struct {
	ID string `json:"id"`
}

// AttachArgs are the parameters of process-attach.
type AttachArgs struct {
	ID string `json:"id"`
	// Stdin lets stdin and stdin-close frames reach the process, if its
	// stdin is still open; otherwise they are dropped.
	Stdin bool `json:"stdin,omitempty"`
	// NoFollow sends the buffered output and ends, instead of following
	// the process until it exits.
	NoFollow bool `json:"no_follow,omitempty"`
}

// SignalArgs are the parameters of process-signal and of a signal procControl
// request. Signal is a name ("SIGTERM", "TERM") or a number. SIGKILL kills
// the process's whole tree; other signals go to its process group.
type SignalArgs struct {
	ID     string `json:"id,omitempty"`
	Signal string `json:"signal"`
}

// SessionSpec creates a session: a long-lived shell in which commands run
// one after the other, sharing the working directory, variables and
// functions.
type SessionSpec struct {
	Name  string   `json:"name"`
	Shell string   `json:"shell,omitempty"` // default "sh"; any POSIX shell (busybox sh, dash, bash)
	User  string   `json:"user,omitempty"`
	Env   []string `json:"env,omitempty"`
	Dir   string   `json:"dir,omitempty"`
}

// SessionInfo describes a session.
type SessionInfo struct {
	Name     string    `json:"name"`
	Shell    string    `json:"shell"`
	User     string    `json:"user,omitempty"`
	PID      int       `json:"pid"` // of the shell
	Created  time.Time `json:"created"`
	Busy     bool      `json:"busy,omitempty"`
	Commands int64     `json:"commands"`
	Restarts int64     `json:"restarts,omitempty"`
}

// SessionRef names a session.
type SessionRef struct {
	Name string `json:"name"`
}

// SessionCommand is one command for a session's shell.
type SessionCommand struct {
	Name        string        `json:"name"`
	Command     string        `json:"command"` // shell text, e.g. "cd /tmp && make"
	Timeout     time.Duration `json:"timeout,omitempty"`
	OutputLimit int64         `json:"output_limit,omitempty"` // 0 means DefaultOutputLimit
}

// SessionResult is a session command's status. Rusage fields of the
// embedded result stay zero: the command runs inside the long-lived shell.
type SessionResult struct {
	ExecResult
	// Restarted: the command had to be stopped (timeout) and could only be
	// stopped by killing the shell, which was started afresh; the session's
	// state (directory, variables, functions, background jobs) is lost.
	Restarted bool `json:"restarted,omitempty"`
	// SessionEnded: the shell exited (e.g. the command ran exit) or could
	// not be replaced, and the session is gone.
	SessionEnded bool `json:"session_ended,omitempty"`
}

func Argv0(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// SessionNamePattern is what a session name must match.
const SessionNamePattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`
