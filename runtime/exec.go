//go:build linux

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/events"
)

// execExited records how a command ended: its exit code (and signal), or
// the error that ended the call.
func (m *Manager) execExited(id string, res ExecResult, err error) {
	attrs := map[string]string{"exit_code": strconv.Itoa(res.ExitCode)}
	if res.Signal != "" {
		attrs["signal"] = res.Signal
	}
	if res.TimedOut {
		attrs["timed_out"] = "true"
	}
	if err != nil {
		attrs = map[string]string{"error": truncate(err.Error(), 256)}
	}
	m.emit(events.ExecExited, id, attrs)
}

var idRe = regexp.MustCompile(`^[0-9a-f]{12}$`)

// runtimeOptions names the runc binary for the shim. containerd 2.2 has no
// daemon-wide setting for it outside CRI.
func runtimeOptions(runc string) any {
	if runc == "" {
		return nil
	}
	return &options.Options{BinaryName: runc}
}

// agentFor returns the channel to a sandbox's init. An id the inventory
// knows as client-visible needs no containerd round trip: this is the exec
// hot path. Anything else (a name, a warm-pool member not yet handed out,
// an id another boxd made) goes through find, which checks the managed
// label. While the sandbox's dead init is being replaced, it waits for the
// new one (up to restartWait) instead of failing on the old one's socket.
func (m *Manager) agentFor(ctx context.Context, idOrName string) (*host.Client, string, error) {
	// Another user's sandbox takes the slow path, where find reports it
	// not found (after looking for a sandbox of the caller's so named).
	if owner, ok := m.inv.visibleOwner(idOrName); ok && mayUse(ctx, owner) && idRe.MatchString(idOrName) {
		m.awaitRelease(ctx, idOrName, restartWait)
		// A kept connection to the init stands for its socket: the
		// pool is dropped whenever the init is replaced.
		if m.agentLinkFor(idOrName).live() || m.agentReady(idOrName) {
			return m.agentClient(ctx, idOrName)
		}
	}
	ctr, err := m.find(ctx, idOrName)
	if err != nil {
		return nil, "", err
	}
	m.awaitRelease(ctx, ctr.ID(), restartWait)
	return m.agentClient(ctx, ctr.ID())
}

// agentClient is the channel to a found sandbox's init: refused while the
// sandbox is paused (a frozen init would leave the call hanging), and
// counted as use for idle expiry while any connection of it is open. A
// checkpointed sandbox is restored first if the call asked to resume it
// (exec --resume) or it resumes on its own (auto-resume); a sandbox whose
// client is kept was not checkpointed since (a checkpoint drops it).
func (m *Manager) agentClient(ctx context.Context, id string) (*host.Client, string, error) {
	if m.agentLinkFor(id).client.Load() == nil {
		if err := m.restoreForCall(ctx, id); err != nil {
			return nil, "", err
		}
	}
	if err := m.checkPaused(ctx, id); err != nil {
		return nil, "", err
	}
	l := m.agentLinkFor(id) // a restore replaced it
	if c := l.client.Load(); c != nil {
		return c, id, nil
	}
	l.gvisor.Store(m.isGvisor(id))
	c := m.agent(id).Tracked(func() func() { return m.track(id) }).Pooled(l.pool)
	l.client.Store(c)
	return c, id, nil
}

// agentLink is what the exec path keeps per sandbox between calls: the
// pool of kept connections to its init (execs and pings reuse them
// instead of dialling, host.Pool) and the client that uses it, built once
// (which runtime the sandbox is on is a look at the state directory). It
// lives as long as the init: dropped when the sandbox is deleted or its
// init replaced.
type agentLink struct {
	pool   *host.Pool
	client atomic.Pointer[host.Client]
	// gvisor: the sandbox runs under gVisor, whose processes are not in
	// host cgroups (no command cgroups).
	gvisor atomic.Bool
}

// live reports whether the link holds a kept connection to the init, which
// is then known to be up (a check for its socket is not needed).
func (l *agentLink) live() bool { return l.client.Load() != nil && l.pool.Idle() > 0 }

func (m *Manager) agentLinkFor(id string) *agentLink {
	if l, ok := m.agentLinks.Load(id); ok {
		return l.(*agentLink)
	}
	l, _ := m.agentLinks.LoadOrStore(id, &agentLink{pool: host.NewPool()})
	return l.(*agentLink)
}

// dropAgentPool closes sandbox id's kept connections and forgets its
// client: at delete, and when its init is replaced (they would only find
// the old one gone).
func (m *Manager) dropAgentPool(id string) {
	if l, ok := m.agentLinks.LoadAndDelete(id); ok {
		l.(*agentLink).pool.Close()
	}
	if sp, ok := m.cmdcg.spawns.Load(id); ok {
		sp.(*spawning).setInit(procInfo{}) // a new init has another pid
	}
}

// restartWait bounds how long a call waits for a sandbox's restart (new
// task, start, init ready: well under a second unless the host is loaded).
const restartWait = 10 * time.Second

// notRunning turns a failed connection to the init into a clear
// failed_precondition error.
func (m *Manager) notRunning(ctx context.Context, id string, err error) error {
	if err == nil {
		return nil
	}
	var errno syscall.Errno
	if errors.Is(err, os.ErrNotExist) || (errors.As(err, &errno) && (errno == syscall.ECONNREFUSED || errno == syscall.ENOENT)) {
		state := "not running"
		if sb, gerr := m.Get(ctx, id); gerr == nil {
			state = sb.State
			if r := sb.Restarts.Refused; r != "" {
				state += "; boxd does not restart it: " + r
			}
		}
		return fmt.Errorf("sandbox %s is %s: %w", id, state, errdefs.ErrFailedPrecondition)
	}
	return err
}

// ExecRequest is a command to run in a sandbox.
type ExecRequest = wire.ExecRequest

// ExecResult is a finished command's status.
type ExecResult = wire.ExecResult

// ExecOption adjusts one ExecProcess call.
type ExecOption func(*execOptions)

type execOptions struct {
	maxOutput    int64
	uncontrolled bool
}

// OutputAtMost holds the command's output cap, after the sandbox's default
// is applied, to at most n bytes: for callers that buffer the output.
func OutputAtMost(n int64) ExecOption { return func(o *execOptions) { o.maxOutput = n } }

// WithoutControls says the caller will not signal the command or resize
// its terminal while it runs, which lets the call reuse a kept connection
// to the init (the exec floor).
func WithoutControls() ExecOption { return func(o *execOptions) { o.uncontrolled = true } }

// ExecProcess runs a command in the foreground of a sandbox and returns
// its stream: every way of running a command and waiting for it (the API's
// Exec, ExecStream and ProcessService.Exec, image builds) is this call.
// Closing the stream before the result kills the command's tree. The
// command's end is recorded (an exec-exited event) and an OOM kill marked
// in its result.
func (m *Manager) ExecProcess(ctx context.Context, idOrName string, spec wire.ProcessSpec, opts ...ExecOption) (*host.ProcessStream, error) {
	var o execOptions
	for _, opt := range opts {
		opt(&o)
	}
	if idOrName == "" {
		return nil, fieldErr("sandbox_id", "empty")
	}
	if err := ValidateProcessSpec(&spec); err != nil {
		return nil, err
	}
	c, id, err := m.agentFor(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	m.execStarted(id, spec.Args)
	if spec.Timeout == 0 || spec.OutputLimit == 0 {
		d := m.execDefaults(ctx, id)
		if spec.Timeout == 0 {
			spec.Timeout = d.ExecTimeout
		}
		if spec.OutputLimit == 0 {
			spec.OutputLimit = d.OutputLimit
		}
	}
	if o.maxOutput > 0 && (spec.OutputLimit == 0 || spec.OutputLimit > o.maxOutput) {
		spec.OutputLimit = o.maxOutput
	}
	before, beforeOK := m.oomKills(id)
	var g *cmdGroup
	if !m.agentLinkFor(id).gvisor.Load() {
		g = m.newCmdGroup(id)
	}
	spec.ReportStart = g != nil
	ps, err := c.ExecProcess(ctx, spec, !o.uncontrolled)
	if err == nil && g != nil {
		// The started frame comes first: the command goes into its
		// cgroup (in the background) from there.
		ps.OnStart = g.start
		if err = ps.AwaitStart(); err != nil {
			ps.Close()
		}
	}
	if err != nil {
		g.finish(true)
		m.execExited(id, ExecResult{}, err)
		return nil, m.procErr(ctx, id, "exec", err)
	}
	ps.OnEnd = func(res *ExecResult, err error) error {
		// A timeout or an abandoned command takes its whole tree along;
		// a command that exited leaves its leftovers running.
		g.finish(err != nil || res.TimedOut)
		if err != nil {
			m.execExited(id, ExecResult{}, err)
			return m.procErr(ctx, id, "exec", err)
		}
		g.useCgroupUsage(res)
		m.markOOM(id, before, beforeOK, res)
		m.execExited(id, *res, nil)
		return nil
	}
	return ps, nil
}

// execDefaults is a sandbox's default exec timeout and output cap, cached
// after the first look at its label (they change only by update, which
// refreshes the cache).
func (m *Manager) execDefaults(ctx context.Context, id string) Tunables {
	if v, ok := m.execDefs.Load(id); ok {
		return v.(Tunables)
	}
	ctx = namespaces.WithNamespace(ctx, m.cfg.Namespace)
	ctr, err := m.cfg.Client.LoadContainer(ctx, id)
	if err != nil {
		return Tunables{}
	}
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return Tunables{}
	}
	var rec record
	if json.Unmarshal([]byte(labels[LabelSandbox]), &rec) != nil {
		return Tunables{}
	}
	d := Tunables{ExecTimeout: rec.ExecTimeout, OutputLimit: rec.OutputLimit}
	m.execDefs.Store(id, d)
	return d
}
