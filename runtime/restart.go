//go:build linux

// Room: reconcile. Restarting a sandbox's dead init, bounded by the
// restart policy, and its history in a label.

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/events"

	"golang.org/x/sys/unix"
)

// LabelRestarts holds a sandbox's restart history (JSON of restartState),
// so the count, the last reason and a refusal survive a boxd restart.
const LabelRestarts = "boxd.io/restarts"

// RestartPolicy bounds how often boxd replaces a sandbox's dead init. The
// sandbox's root can kill its own init at will (SIGTERM, SIGQUIT, running
// it out of memory or threads), and every restart runs runc, a shim and a
// new init on the host: without a bound that is a free CPU and log storm.
type RestartPolicy struct {
	// Limit is how many restarts a sandbox gets within Window; 0 disables
	// restarts (a dead init leaves its sandbox stopped).
	Limit  int
	Window time.Duration
	// Backoff is the pause after the first restart in the window; it
	// doubles with each further one, up to maxRestartBackoff.
	Backoff time.Duration
}

// DefaultRestartPolicy is what --restart-limit defaults to.
var DefaultRestartPolicy = RestartPolicy{Limit: 5, Window: 10 * time.Minute, Backoff: time.Second}

const (
	maxRestartBackoff = time.Minute
	// maxRestartLimit keeps the restart label well under containerd's 4 KiB
	// per label (one timestamp per restart in the window).
	maxRestartLimit = 100
)

// ParseRestartLimit reads "N/WINDOW" (e.g. "5/10m"), or "0" for no restarts.
func ParseRestartLimit(s string) (RestartPolicy, error) {
	p := DefaultRestartPolicy
	if s == "0" || s == "off" {
		p.Limit = 0
		return p, nil
	}
	n, w, ok := strings.Cut(s, "/")
	if !ok {
		return p, fmt.Errorf("restart limit %q: want N/WINDOW, e.g. 5/10m, or 0", s)
	}
	limit, err := strconv.Atoi(n)
	if err != nil || limit < 0 || limit > maxRestartLimit {
		return p, fmt.Errorf("restart limit %q: N must be a whole number from 0 to %d", s, maxRestartLimit)
	}
	window, err := time.ParseDuration(w)
	if err != nil || window <= 0 {
		return p, fmt.Errorf("restart limit %q: WINDOW must be a positive duration such as 10m", s)
	}
	p.Limit, p.Window = limit, window
	return p, nil
}

func (p RestartPolicy) String() string {
	if p.Limit <= 0 {
		return "0"
	}
	return fmt.Sprintf("%d/%s", p.Limit, p.Window)
}

// restartState is a sandbox's restart history as stored in LabelRestarts.
type restartState struct {
	Count      int         `json:"count,omitempty"`
	Recent     []time.Time `json:"recent,omitempty"` // restarts within the window, oldest first
	LastAt     time.Time   `json:"last_at,omitzero"`
	LastReason string      `json:"last_reason,omitempty"`
	// Refused is why boxd does not restart the sandbox now. A limit
	// refusal lifts when the window allows; a tampered rootfs stays so
	// (nothing can change it while no init runs), until delete or expiry.
	Refused  string `json:"refused,omitempty"`
	Tampered bool   `json:"tampered,omitempty"`
	// Failed is how the last restart ended if its init died before it was
	// ready: its task is gone then, and the next restart has no exit
	// status to report.
	Failed string `json:"failed,omitempty"`
}

func parseRestartState(v string) restartState {
	var st restartState
	if v != "" {
		// A corrupt label (only boxd writes it) counts as no history.
		_ = json.Unmarshal([]byte(v), &st)
	}
	return st
}

// RestartInfo is what boxd reports about a sandbox's restarts.
type RestartInfo struct {
	Count      int
	LastAt     time.Time
	LastReason string
	Refused    string // non-empty: boxd will not restart the sandbox, and why
}

func restartInfo(labels map[string]string) RestartInfo {
	st := parseRestartState(labels[LabelRestarts])
	return RestartInfo{Count: st.Count, LastAt: st.LastAt, LastReason: st.LastReason, Refused: st.Refused}
}

// admit decides whether st may restart at now. It drops restarts older than
// the window from st.Recent, then returns a refusal once the limit is
// reached, or how long the backoff still asks to wait.
func (p RestartPolicy) admit(st *restartState, now time.Time) (wait time.Duration, refusal string) {
	if p.Limit <= 0 {
		return 0, "restarts are disabled (--restart-limit 0)"
	}
	kept := st.Recent[:0]
	for _, t := range st.Recent {
		if now.Sub(t) < p.Window {
			kept = append(kept, t)
		}
	}
	st.Recent = kept
	n := len(st.Recent)
	if n >= p.Limit {
		next := st.Recent[n-p.Limit].Add(p.Window).UTC().Truncate(time.Second)
		return 0, fmt.Sprintf("restart limit reached: %d restarts within %s; the next is allowed after %s", n, p.Window, next.Format(time.RFC3339))
	}
	if n == 0 {
		return 0, ""
	}
	backoff := p.Backoff
	for i := 1; i < n && backoff < maxRestartBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, maxRestartBackoff)
	return max(st.Recent[n-1].Add(backoff).Sub(now), 0), ""
}

// saveRestartState writes st to the sandbox's label.
func (m *Manager) saveRestartState(ctx context.Context, ctr client.Container, st restartState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if _, err := ctr.SetLabels(ctx, map[string]string{LabelRestarts: string(b)}); err != nil {
		return fmt.Errorf("sandbox %s: save restart state: %w", ctr.ID(), err)
	}
	return nil
}

// restartIfDead gives a sandbox whose init is gone a new one on the same
// container and writable layer, if the restart policy allows it and the
// writable layer holds nothing that would redirect what runc does there
// (checkRootfs). A refusal is logged once and kept in the sandbox's
// restart label, where inspect shows it.
func (m *Manager) restartIfDead(ctx context.Context, ctr client.Container) (bool, error) {
	id := ctr.ID()
	if !m.dead(ctx, ctr) {
		return false, nil
	}
	if !m.claim(id) {
		return false, nil
	}
	defer m.release(id)
	if !m.dead(ctx, ctr) { // deleted or restarted meanwhile
		return false, nil
	}
	labels, err := ctr.Labels(ctx)
	if err != nil {
		return false, nil
	}
	st := parseRestartState(labels[LabelRestarts])
	if st.Tampered || stopped(labels) {
		// A stopped sandbox waits for StartSandbox.
		return false, nil
	}
	log := m.log.With("sandbox", id)
	now := time.Now()
	wait, refusal := m.cfg.Restarts.admit(&st, now)
	if refusal != "" {
		if st.Refused == refusal {
			return false, nil
		}
		st.Refused = refusal
		log.Warn("init gone; not restarting the sandbox", "reason", refusal, "restarts", st.Count)
		return false, m.saveRestartState(ctx, ctr, st)
	}
	if wait > 0 {
		return false, nil
	}

	why, err := m.removeDeadTask(ctx, ctr)
	if err != nil {
		return false, fmt.Errorf("restart sandbox %s: %w", id, err)
	}
	if why == "" {
		why = "init gone: no task (containerd or the host restarted)"
		if st.Failed != "" {
			why = st.Failed
		}
	}
	st.Count++
	st.Recent = append(st.Recent, now)
	st.LastAt, st.LastReason, st.Refused, st.Failed = now.UTC(), why, "", ""
	t0 := time.Now()
	if err := m.ensureDisk(ctx, ctr); err != nil {
		_ = m.saveRestartState(ctx, ctr, st)
		return false, fmt.Errorf("restart sandbox %s: %w", id, err)
	}
	if err := m.ensureBinds(ctx, ctr); err != nil {
		_ = m.saveRestartState(ctx, ctr, st)
		return false, fmt.Errorf("restart sandbox %s: %w", id, err)
	}
	problem, err := m.checkRootfs(ctx, ctr)
	log.Debug("rootfs checked", "took", time.Since(t0), "problem", problem, "err", err)
	if err != nil {
		// Fail closed; the attempt counts, so the backoff spaces retries.
		_ = m.saveRestartState(ctx, ctr, st)
		return false, fmt.Errorf("restart sandbox %s: %w", id, err)
	}
	if problem != "" {
		st.Tampered, st.Refused = true, "rootfs tampered: "+problem
		log.Error("init gone; not restarting the sandbox: its writable layer would redirect runc; files are kept until delete or expiry",
			"reason", st.Refused, "init", why)
		return false, m.saveRestartState(ctx, ctr, st)
	}
	if err := m.saveRestartState(ctx, ctr, st); err != nil {
		return false, fmt.Errorf("restart sandbox %s: %w", id, err)
	}

	log.Warn("init gone; restarting the sandbox (its processes are lost, its files are kept)", "init", why, "restarts", st.Count)
	if err := m.startNewInit(ctx, ctr, m.cfg.ReadyTimeout+restartSlack); err != nil {
		// The error can quote the init's log: keep the label small.
		st.Failed = truncate("the previous restart failed: "+err.Error(), 512)
		if serr := m.saveRestartState(ctx, ctr, st); serr != nil {
			log.Warn("save restart state", "err", serr)
		}
		return false, fmt.Errorf("restart sandbox %s: %w", id, err)
	}
	m.emit(events.Restarted, id, map[string]string{"reason": why, "restarts": strconv.Itoa(st.Count)})
	m.emit(events.Started, id, nil)
	return true, nil
}

// restartSlack is what a restart may take beyond the init's ready timeout
// (runc create and start) before boxd gives up on it.
const restartSlack = 30 * time.Second

// startNewInit prepares the channel, starts a new task for a sandbox and
// waits until its init answers, for at most timeout: the reconciler runs
// restarts one after another, so one that hangs (runc blocked on something
// in the rootfs that checkRootfs did not foresee) must not stop expiry and
// restarts of every other sandbox. A task left behind by a failure is
// killed and deleted.
func (m *Manager) startNewInit(ctx context.Context, ctr client.Container, timeout time.Duration) error {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spec, err := ctr.Spec(sctx)
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if err := m.renewNetwork(sctx, ctr); err != nil {
		return err
	}
	// Kept connections went to the init being replaced.
	m.dropAgentPool(ctr.ID())
	// startInit deletes the task it made if anything fails.
	_, err = m.startInit(sctx, ctr, spec, nil, nil, nil)
	return err
}

// removeDeadTask deletes a sandbox's stopped task, if it still has one,
// and says how its init ended ("" if there was no task).
func (m *Manager) removeDeadTask(ctx context.Context, ctr client.Container) (string, error) {
	task, err := ctr.Task(ctx, nil)
	if errdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("load dead task: %w", err)
	}
	st, err := task.Status(ctx)
	if err != nil {
		return "", fmt.Errorf("dead task status: %w", err)
	}
	if st.Status != client.Stopped {
		return "", fmt.Errorf("task is %s, not stopped: %w", st.Status, errdefs.ErrConflict)
	}
	if _, err := task.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("delete dead task: %w", err)
	}
	return exitReason(st.ExitStatus), nil
}

func exitReason(code uint32) string {
	why := fmt.Sprintf("init exited with status %d", code)
	if code > 128 && code < 128+65 {
		why += " (" + unix.SignalName(syscall.Signal(code-128)) + ")"
	}
	return why
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
