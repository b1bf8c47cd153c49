//go:build linux

package runtime

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// Bounds on process and session requests, checked before anything reaches
// the sandbox.
const (
	maxProcArgBytes = 128 << 10
	maxProcArgs     = 4096
	maxUserSpec     = 256
)

var (
	procUserRe      = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?(:[A-Za-z0-9_][A-Za-z0-9_.-]*\$?)?$`)
	procIDRe        = regexp.MustCompile(`^p[0-9]{1,19}$`)
	procSessionName = regexp.MustCompile(wire.SessionNamePattern)
)

func checkProcArgs(args []string) error {
	if len(args) == 0 {
		return fieldErr("args", "no command given")
	}
	if len(args) > maxProcArgs {
		return fieldErr("args", "%d arguments, at most %d allowed", len(args), maxProcArgs)
	}
	for i, a := range args {
		if len(a) > maxProcArgBytes {
			return fieldErr("args", "argument %d is longer than 128 KiB", i)
		}
		if strings.IndexByte(a, 0) >= 0 {
			return fieldErr("args", "argument %d contains a NUL byte", i)
		}
	}
	if args[0] == "" {
		return fieldErr("args", "the command name is empty")
	}
	return nil
}

func checkProcUser(field, u string) error {
	if u != "" && (len(u) > maxUserSpec || !procUserRe.MatchString(u)) {
		return fieldErr(field, "%q is not NAME, UID, NAME:GROUP or UID:GID", u)
	}
	return nil
}

func checkProcID(id string) error {
	if !procIDRe.MatchString(id) {
		return fieldErr("process_id", "%q is not a process id (p1, p2, ...)", id)
	}
	return nil
}

func checkSessionName(name string) error {
	if !procSessionName.MatchString(name) {
		return fieldErr("name", "%q must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	}
	return nil
}

func checkSignal(sig string) error {
	if _, err := wire.ParseSignal(sig); err != nil {
		return fieldErr("signal", "%q is not a signal (examples: SIGTERM, TERM, 15)", sig)
	}
	return nil
}

// ValidateProcessSpec checks a process request as far as the host can: the
// user's and group's existence, the command's and the directory's are the
// sandbox's business.
func ValidateProcessSpec(spec *wire.ProcessSpec) error {
	if err := checkProcArgs(spec.Args); err != nil {
		return err
	}
	if err := ValidateEnv("env", spec.Env); err != nil {
		return err
	}
	if err := ValidateWorkdir("workdir", spec.Dir); err != nil {
		return err
	}
	if err := checkProcUser("user", spec.User); err != nil {
		return err
	}
	if spec.OutputLimit < 0 {
		return fieldErr("output_limit", "%d must not be negative", spec.OutputLimit)
	}
	if w := spec.Window; w != nil && (w.Rows > wire.MaxWindowDim || w.Cols > wire.MaxWindowDim) {
		return fieldErr("window", "%dx%d: at most %d rows and columns", w.Rows, w.Cols, wire.MaxWindowDim)
	}
	return nil
}

// procErr adds the sandbox to an error from the agent and turns a dead
// channel into failed_precondition.
func (m *Manager) procErr(ctx context.Context, id, what string, err error) error {
	return m.notRunning(ctx, id, fmt.Errorf("%s in sandbox %s: %w", what, id, err))
}

// StartProcess starts a background command.
func (m *Manager) StartProcess(ctx context.Context, idOrName string, spec wire.ProcessSpec) (wire.ProcessInfo, error) {
	if err := ValidateProcessSpec(&spec); err != nil {
		return wire.ProcessInfo{}, err
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return wire.ProcessInfo{}, err
	}
	g := m.spawnGroup(id)
	info, err := c.StartProcess(ctx, spec)
	g.startedAs(procGroupPrefix+info.ID, info.PID, err)
	if err != nil {
		return info, m.procErr(ctx, id, "start", err)
	}
	return info, nil
}

// ListProcesses lists a sandbox's background processes, oldest first.
func (m *Manager) ListProcesses(ctx context.Context, idOrName string) ([]wire.ProcessInfo, error) {
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	infos, err := c.ListProcesses(ctx)
	if err != nil {
		return nil, m.procErr(ctx, id, "list processes", err)
	}
	return infos, nil
}

// WaitProcess blocks until a background process exits.
func (m *Manager) WaitProcess(ctx context.Context, idOrName, pid string) (wire.ProcessInfo, error) {
	if err := checkProcID(pid); err != nil {
		return wire.ProcessInfo{}, err
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return wire.ProcessInfo{}, err
	}
	info, err := c.WaitProcess(ctx, pid)
	if err != nil {
		return info, m.procErr(ctx, id, "wait", err)
	}
	return info, nil
}

// SignalProcess signals a background process (SIGKILL: its whole tree).
func (m *Manager) SignalProcess(ctx context.Context, idOrName, pid, sig string) (wire.ProcessInfo, error) {
	if err := checkProcID(pid); err != nil {
		return wire.ProcessInfo{}, err
	}
	if err := checkSignal(sig); err != nil {
		return wire.ProcessInfo{}, err
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return wire.ProcessInfo{}, err
	}
	info, err := c.SignalProcess(ctx, pid, sig)
	if err != nil {
		return info, m.procErr(ctx, id, "signal", err)
	}
	if isKill(sig) {
		// Its whole cgroup: what left its session too.
		m.killGroup(id, procGroupPrefix+pid)
	}
	return info, nil
}

// AttachProcess connects to a background process's output (and input).
func (m *Manager) AttachProcess(ctx context.Context, idOrName string, a wire.AttachArgs) (*host.ProcessStream, wire.ProcessInfo, error) {
	if err := checkProcID(a.ID); err != nil {
		return nil, wire.ProcessInfo{}, err
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, wire.ProcessInfo{}, err
	}
	ps, info, err := c.AttachProcess(ctx, a)
	if err != nil {
		return nil, info, m.procErr(ctx, id, "attach", err)
	}
	return ps, info, nil
}

// CreateSession starts a session's shell.
func (m *Manager) CreateSession(ctx context.Context, idOrName string, spec wire.SessionSpec) (wire.SessionInfo, error) {
	if err := checkSessionName(spec.Name); err != nil {
		return wire.SessionInfo{}, err
	}
	if len(spec.Shell) > maxPathBytes || strings.IndexByte(spec.Shell, 0) >= 0 {
		return wire.SessionInfo{}, fieldErr("shell", "too long or contains NUL")
	}
	if err := ValidateEnv("env", spec.Env); err != nil {
		return wire.SessionInfo{}, err
	}
	if err := ValidateWorkdir("workdir", spec.Dir); err != nil {
		return wire.SessionInfo{}, err
	}
	if err := checkProcUser("user", spec.User); err != nil {
		return wire.SessionInfo{}, err
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return wire.SessionInfo{}, err
	}
	g := m.spawnGroup(id)
	info, err := c.CreateSession(ctx, spec)
	g.startedAs(sessionGroupPrefix+spec.Name, info.PID, err)
	if err != nil {
		return info, m.procErr(ctx, id, "create session", err)
	}
	return info, nil
}

// ListSessions lists a sandbox's sessions by name.
func (m *Manager) ListSessions(ctx context.Context, idOrName string) ([]wire.SessionInfo, error) {
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	infos, err := c.ListSessions(ctx)
	if err != nil {
		return nil, m.procErr(ctx, id, "list sessions", err)
	}
	return infos, nil
}

// RemoveSession kills a session's shell and all it started.
func (m *Manager) RemoveSession(ctx context.Context, idOrName, name string) error {
	if err := checkSessionName(name); err != nil {
		return err
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return err
	}
	if err := c.RemoveSession(ctx, name); err != nil {
		return m.procErr(ctx, id, "remove session", err)
	}
	m.killGroup(id, sessionGroupPrefix+name)
	return nil
}

// SessionExec runs a command in a session, streaming its output.
func (m *Manager) SessionExec(ctx context.Context, idOrName string, cmd wire.SessionCommand, stdout, stderr io.Writer) (wire.SessionResult, error) {
	if err := checkSessionName(cmd.Name); err != nil {
		return wire.SessionResult{}, err
	}
	switch {
	case strings.TrimSpace(cmd.Command) == "":
		return wire.SessionResult{}, fieldErr("command", "empty")
	case len(cmd.Command) > wire.MaxSessionCommand:
		return wire.SessionResult{}, fieldErr("command", "%d bytes, at most %d allowed", len(cmd.Command), wire.MaxSessionCommand)
	case strings.IndexByte(cmd.Command, 0) >= 0:
		return wire.SessionResult{}, fieldErr("command", "contains a NUL byte")
	case cmd.OutputLimit < 0:
		return wire.SessionResult{}, fieldErr("output_limit", "%d must not be negative", cmd.OutputLimit)
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return wire.SessionResult{}, err
	}
	sent := bootTicks()
	res, err := c.SessionExec(ctx, cmd, stdout, stderr)
	if err != nil {
		return res, m.procErr(ctx, id, "session exec", err)
	}
	m.afterSessionExec(ctx, c, id, cmd.Name, sent, res)
	return res, nil
}
