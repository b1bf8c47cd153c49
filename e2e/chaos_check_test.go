//go:build linux

package e2e

// The chaos harness's invariants: every acknowledged sandbox is there and
// usable with its files (or failed with a reason and deletable, or deleted
// by a call that said so); nothing is left without its sandbox; events
// never go backwards and carry every acknowledged create and delete; the
// audit log has a line for every acknowledged mutating call.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/core/snapshots"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

// checkAll checks the sandboxes the ledger knows, then waits (bounded) for
// anything without its sandbox to go and reports what stays.
func (c *chaosEnv) checkAll(after string) {
	c.checkLedger(after)
	c.checkStrays(after)
	var leaks []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		leaks = c.leaks()
		if len(leaks) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, l := range leaks {
		c.t.Errorf("after %s: left without its sandbox: %s", after, l)
	}
}

func (c *chaosEnv) checkLedger(after string) {
	c.led.mu.Lock()
	recs := make([]*sbRec, 0, len(c.led.byID))
	for _, r := range c.led.byID {
		recs = append(recs, r)
	}
	c.led.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].id < recs[j].id })
	for _, r := range recs {
		c.led.mu.Lock()
		deleted, tried := r.deleted, r.deleteTried
		c.led.mu.Unlock()
		if err := c.checkOne(r, deleted, tried); err != nil {
			c.t.Errorf("after %s: sandbox %s (%s): %v", after, r.id, r.name, err)
		}
	}
}

// checkOne: deleted and gone; or there and usable with every acknowledged
// file; or there, not running, with a reason, and deletable.
func (c *chaosEnv) checkOne(r *sbRec, deleted, tried bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := c.api.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: r.id}))
	switch {
	case connect.CodeOf(err) == connect.CodeNotFound && (deleted || tried):
		c.led.update(r.id, func(r *sbRec) { r.deleted = true })
		return nil
	case connect.CodeOf(err) == connect.CodeNotFound:
		return fmt.Errorf("acknowledged create, never deleted, is gone")
	case err != nil:
		return fmt.Errorf("get: %w", err)
	case deleted:
		return fmt.Errorf("a delete returned success, yet it is there (%s)", g.Msg.Sandbox.State)
	}
	sb := g.Msg.Sandbox
	// A dead init is restarted by the reconcile pass: the sandbox is
	// stopped until then.
	for deadline := time.Now().Add(20 * time.Second); !tried && sb.State == "stopped" && time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		if g, err := c.api.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: r.id})); err == nil {
			sb = g.Msg.Sandbox
		}
	}
	if tried || (sb.State != "running" && sb.State != "paused") {
		if !tried && sb.LastRestartReason == "" {
			c.t.Errorf("sandbox %s is %s after 20 s, with no reason given", r.id, sb.State)
		}
		return c.deleteNow(r.id)
	}
	if sb.State == "paused" {
		if _, err := c.api.UnpauseSandbox(ctx, connect.NewRequest(&boxdv1.UnpauseSandboxRequest{Id: r.id})); err != nil {
			return fmt.Errorf("resume a sandbox left paused: %w", err)
		}
	}
	return c.checkFiles(ctx, r.id)
}

// checkFiles reads every acknowledged upload back, giving a restarted init
// a few seconds to answer.
func (c *chaosEnv) checkFiles(ctx context.Context, id string) error {
	files := c.led.filesOf(id)
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		var out string
		out, err = execStreamOut(ctx, c, id, "for f in /workspace/up-*; do echo \"== $f\"; cat \"$f\"; done; true")
		if err == nil {
			for p, want := range files {
				if !strings.Contains(out, "== "+p+"\n"+want) {
					return fmt.Errorf("acknowledged upload %s lost or changed", p)
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not usable: exec: %w", err)
		}
	}
}

func (c *chaosEnv) deleteNow(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.api.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id, Force: true})); err != nil && connect.CodeOf(err) != connect.CodeNotFound {
		return fmt.Errorf("not usable and not deletable: %w", err)
	}
	c.led.update(id, func(r *sbRec) { r.deleted = true })
	return nil
}

// checkStrays looks at the sandboxes boxd lists that no call acknowledged:
// only a create or fork that returned an error may have left one, and it
// must be usable or deletable. The harness deletes them.
func (c *chaosEnv) checkStrays(after string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := c.api.ListSandboxes(ctx, connect.NewRequest(&boxdv1.ListSandboxesRequest{All: true}))
	if err != nil {
		c.t.Errorf("after %s: list: %v", after, err)
		return
	}
	for _, sb := range l.Msg.Sandboxes {
		c.led.mu.Lock()
		_, known := c.led.byID[sb.Id]
		failed := c.led.failedNames[sb.Name]
		c.led.mu.Unlock()
		switch {
		case known:
		case failed:
			c.stats.call("stray of a failed create", nil, 0, false)
			if err := c.deleteNow(sb.Id); err != nil {
				c.t.Errorf("after %s: stray %s of a failed create: %v", after, sb.Id, err)
			}
		default:
			c.t.Errorf("after %s: sandbox %s (%q) listed, but no call made it", after, sb.Id, sb.Name)
		}
	}
}

// leaks lists what is on the host without its sandbox: containers and
// pool members, snapshots, mounts, state directories, cgroups, disk
// images' loop devices.
func (c *chaosEnv) leaks() []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []string
	l, err := c.api.ListSandboxes(ctx, connect.NewRequest(&boxdv1.ListSandboxesRequest{All: true}))
	if err != nil {
		return []string{"list: " + err.Error()}
	}
	listed := map[string]bool{}
	for _, sb := range l.Msg.Sandboxes {
		listed[sb.Id] = true
	}
	ctrs, err := c.ctr.Containers(c.cctx)
	if err != nil {
		return []string{"containerd containers: " + err.Error()}
	}
	live, keys, members := map[string]bool{}, map[string]bool{}, 0
	for _, ct := range ctrs {
		info, err := ct.Info(c.cctx)
		if err != nil {
			continue
		}
		live[ct.ID()], keys[info.SnapshotKey] = true, true
		_, member := info.Labels[runtime.LabelPool]
		switch {
		case listed[ct.ID()]:
		case member && info.Labels[runtime.LabelManaged] != "true":
			members++
		default:
			out = append(out, fmt.Sprintf("container %s (labels %v)", ct.ID(), sortedKeys(info.Labels)))
		}
	}
	if members > chaosPool {
		out = append(out, fmt.Sprintf("%d pool members, pool size %d", members, chaosPool))
	}
	for id := range listed {
		if !live[id] {
			out = append(out, "listed sandbox "+id+" has no container")
		}
	}
	out = append(out, c.snapshotLeaks(keys)...)
	out = append(out, c.fileLeaks(live)...)
	return out
}

func (c *chaosEnv) snapshotLeaks(keys map[string]bool) []string {
	var out []string
	err := c.ctr.SnapshotService("overlayfs").Walk(c.cctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive && !keys[info.Name] {
			out = append(out, "active snapshot "+info.Name)
		}
		return nil
	})
	if err != nil {
		out = append(out, "snapshots: "+err.Error())
	}
	return out
}

// fileLeaks: state directories, cgroups and mounts named after a sandbox
// that is gone.
func (c *chaosEnv) fileLeaks(live map[string]bool) []string {
	var out []string
	// Every cgroup hierarchy: v1 controllers, the unified one beside them.
	cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + chaosNS)
	for _, d := range append([]string{filepath.Join(c.state, "sandboxes"), filepath.Join(c.state, "binds")}, cgs...) {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.IsDir() && len(e.Name()) == 12 && !live[e.Name()] {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	mps, err := mountsUnder(c.mnt)
	if err != nil {
		return append(out, "mounts: "+err.Error())
	}
	for _, mp := range mps {
		if !mountOfLive(mp, live) {
			out = append(out, "mount "+mp)
		}
	}
	return out
}

// mountOfLive: a mount point names a live sandbox, or is a snapshot's
// (whose snapshot is checked on its own) that still exists.
func mountOfLive(mp string, live map[string]bool) bool {
	for _, part := range strings.Split(mp, "/") {
		if live[part] {
			return true
		}
	}
	if i := strings.Index(mp, "/snapshots/"); i >= 0 {
		rest := strings.SplitN(mp[i+len("/snapshots/"):], "/", 2)[0]
		_, err := os.Stat(mp[:i+len("/snapshots/")] + rest)
		return err == nil
	}
	return false
}

// mountsUnder lists the mount points strictly under dir.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		fs := strings.Fields(s.Text())
		if len(fs) > 4 && strings.HasPrefix(fs[4], dir+"/") {
			out = append(out, fs[4])
		}
	}
	return out, s.Err()
}

// eventLog is what the follower saw.
type eventLog struct {
	mu        sync.Mutex
	lastSeq   uint64
	lastTime  string
	backwards []string
	seen      map[string]bool // type + " " + sandbox
	reconnect int
}

var chaosEvents = &eventLog{seen: map[string]bool{}}

// followEvents follows the event stream for the whole run, reconnecting
// with since after every fault, and notes any seq that goes backwards.
func (c *chaosEnv) followEvents(start time.Time) {
	since := start.Add(-time.Second).UTC().Format(time.RFC3339Nano)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := c.events.Events(ctx, connect.NewRequest(&boxdv1.EventsRequest{Since: since, Follow: true}))
		if err == nil {
			for s.Receive() {
				if ev := s.Msg().Event; ev != nil {
					chaosEvents.note(ev)
				}
			}
			s.Close()
		}
		cancel()
		chaosEvents.mu.Lock()
		chaosEvents.reconnect++
		if chaosEvents.lastTime != "" {
			since = chaosEvents.lastTime
		}
		chaosEvents.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *eventLog) note(ev *boxdv1.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen[ev.Type+" "+ev.Sandbox] = true
	if ev.Seq <= e.lastSeq {
		// A replay after a reconnect repeats what came before; a later
		// event with a smaller seq went backwards.
		if ev.Time > e.lastTime {
			e.backwards = append(e.backwards, fmt.Sprintf("seq %d at %s after seq %d at %s", ev.Seq, ev.Time, e.lastSeq, e.lastTime))
		}
		return
	}
	e.lastSeq, e.lastTime = ev.Seq, ev.Time
}

// checkEventsAndAudit: every acknowledged create and delete has its event
// and its audit line; the events' seq never went backwards.
func (c *chaosEnv) checkEventsAndAudit() {
	time.Sleep(time.Second) // the follower's last events
	c.led.mu.Lock()
	created, deleted := append([]string(nil), c.led.createdIDs...), append([]string(nil), c.led.deletedIDs...)
	c.led.mu.Unlock()
	chaosEvents.mu.Lock()
	for _, b := range chaosEvents.backwards {
		c.t.Errorf("events: %s", b)
	}
	for _, id := range created {
		if !chaosEvents.seen["created "+id] {
			c.t.Errorf("events: no created event for acknowledged create %s", id)
		}
	}
	for _, id := range deleted {
		if !chaosEvents.seen["deleted "+id] {
			c.t.Errorf("events: no deleted event for acknowledged delete %s", id)
		}
	}
	c.t.Logf("events: followed up to seq %d, %d reconnects", chaosEvents.lastSeq, chaosEvents.reconnect)
	chaosEvents.mu.Unlock()
	c.checkAudit()
}

// checkAudit compares the audit log's ok lines per method with the calls
// boxd acknowledged.
func (c *chaosEnv) checkAudit() {
	ok := map[string]int{}
	paths, _ := filepath.Glob(filepath.Join(c.state, "audit.log*"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			c.t.Errorf("audit: %v", err)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e struct{ Method, Result string }
			if json.Unmarshal([]byte(line), &e) == nil && e.Result == "ok" {
				ok[e.Method[strings.LastIndexByte(e.Method, '/')+1:]]++
			}
		}
	}
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	for op, method := range map[string]string{"create (pool)": "CreateSandbox", "create (cold)": "CreateSandbox", "fork": "ForkSandbox",
		"upload": "WriteFile", "pause": "PauseSandbox", "resume": "UnpauseSandbox", "delete": "DeleteSandbox"} {
		if n := c.stats.acked[op]; n > 0 {
			c.stats.auditWant[method] += n
		}
	}
	for m, want := range c.stats.auditWant {
		if ok[m] < want {
			c.t.Errorf("audit: %d ok lines for %s, %d such calls acknowledged", ok[m], m, want)
		}
	}
}
