package wire

// Sandbox defaults a running init can be told to change (boxctl update):
//
//	set-defaults: -> request{args: Defaults}   <- ok | error
//
// The init applies them to commands, processes, sessions and file
// operations started afterwards; what runs keeps what it started with.
const OpSetDefaults = "set-defaults"

// Defaults are the parts of a sandbox's defaults that can change while it
// runs. Env entries (K=V) are merged over the current environment, later
// ones winning; an empty Workdir keeps the current one. User (NAME, UID,
// NAME:GROUP or UID:GID) is set only by a warm-pool hand-out, before the
// sandbox runs anything: the init resolves it in the sandbox's
// /etc/passwd as it does a default user at start, and refuses an unknown
// one (an invalid-argument error starting "default user:") changing
// nothing. An init that predates the field refuses it as unknown, so a
// hand-out never leaves commands running as root by mistake.
type Defaults struct {
	Env     []string `json:"env,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	User    string   `json:"user,omitempty"`
}

// OpTerminate asks the init to send SIGTERM to every other process of the
// sandbox (boxctl stop, graceful delete); boxd SIGKILLs what is left after
// the grace period.
//
//	terminate: -> request   <- ok | error
const OpTerminate = "terminate"

// ExitBadUser is the init's exit status when the sandbox's default user
// is not in its /etc/passwd: boxd reports it as a bad user field.
const ExitBadUser = 3
