//go:build linux

package e2e

// The chaos harness's faults, the recovery wait after each, and the
// run's counts.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

type fault struct {
	name   string
	inject func(c *chaosEnv, w *workload) error
}

var chaosFaults = []fault{
	{"SIGKILL boxd", func(c *chaosEnv, w *workload) error {
		c.killBoxd()
		time.Sleep(time.Duration(200+c.intn(1500)) * time.Millisecond)
		return c.startBoxd()
	}},
	{"SIGKILL containerd", func(c *chaosEnv, w *workload) error {
		b, err := os.ReadFile(filepath.Join(c.ctrd.Dir, "containerd.pid"))
		if err != nil {
			return err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return err
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 200 && !procExited(pid); i++ {
			time.Sleep(25 * time.Millisecond)
		}
		time.Sleep(time.Duration(200+c.intn(1500)) * time.Millisecond)
		return c.ctrd.Start()
	}},
	{"SIGKILL shim", func(c *chaosEnv, w *workload) error {
		pids := c.shimPids()
		if len(pids) == 0 {
			return errors.New("no shim to kill")
		}
		return syscall.Kill(pids[c.intn(len(pids))], syscall.SIGKILL)
	}},
	{"SIGKILL sandbox init", func(c *chaosEnv, w *workload) error {
		// A sandbox the workload is deleting at this moment has no init
		// to kill: try a few.
		var err error
		for i := 0; i < 5; i++ {
			if err = c.killInit(); err == nil {
				return nil
			}
		}
		return err
	}},
	{"SIGSTOP boxd", func(c *chaosEnv, w *workload) error {
		pid := c.boxdPid()
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return err
		}
		time.Sleep(time.Duration(2000+c.intn(3000)) * time.Millisecond)
		return syscall.Kill(pid, syscall.SIGCONT)
	}},
	{"full state disk", func(c *chaosEnv, w *workload) error {
		fill := filepath.Join(c.mnt, "fill")
		var st unix.Statfs_t
		if err := unix.Statfs(c.mnt, &st); err != nil {
			return err
		}
		free := int64(st.Bavail) * st.Bsize
		if out, err := exec.Command("fallocate", "-l", strconv.FormatInt(free, 10), fill).CombinedOutput(); err != nil {
			// fallocate fails at the last blocks; what it got stays.
			_ = out
		}
		time.Sleep(time.Duration(2000+c.intn(3000)) * time.Millisecond)
		return os.Remove(fill)
	}},
	{"client cancelled mid-stream", func(c *chaosEnv, w *workload) error {
		for i := 0; i < 5; i++ {
			w.cancelMidStream()
			w.uploadCancelled()
		}
		return nil
	}},
}

// uploadCancelled starts an upload and goes away in the middle of it.
func (w *workload) uploadCancelled() {
	r := w.c.led.pick(w.c.intn)
	if r == nil {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	s := w.c.files.WriteFile(ctx)
	_ = s.Send(&boxdv1.WriteFileRequest{SandboxId: r.id, Path: "/workspace/cancelled", Data: make([]byte, 64<<10)})
	_ = s.Send(&boxdv1.WriteFileRequest{Data: make([]byte, 64<<10)})
	cancel()
	_, err := s.CloseAndReceive()
	w.c.stats.call("cancelled upload", err, 0, true)
}

// faultOrder is every fault once, in an order of the seed's choosing, so
// that even a short run meets each kind.
func (c *chaosEnv) faultOrder() []fault {
	fs := append([]fault(nil), chaosFaults...)
	for i := len(fs) - 1; i > 0; i-- {
		j := c.intn(i + 1)
		fs[i], fs[j] = fs[j], fs[i]
	}
	return fs
}

func (c *chaosEnv) inject(f fault, w *workload) {
	c.t.Logf("%s fault: %s (%d sandboxes)", time.Now().UTC().Format("15:04:05.000"), f.name, c.led.live())
	if err := f.inject(c, w); err != nil {
		c.t.Logf("fault %s: %v", f.name, err)
	}
}

// shimPids are the shims serving the harness's containerd.
func (c *chaosEnv) shimPids() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if !strings.HasPrefix(string(comm), "containerd-shim") {
			continue
		}
		if cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(cl), c.ctrd.Address) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// recover waits until boxd answers and a sandbox can be created, used and
// deleted again, and returns how long that took.
func (c *chaosEnv) recover() (time.Duration, error) {
	start := time.Now()
	var last error
	for time.Since(start) < 2*time.Minute {
		if last = c.probe(); last == nil {
			return time.Since(start), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, last
}

func (c *chaosEnv) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.api.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	id := r.Msg.Sandbox.Id
	_, xerr := execStreamOut(ctx, c, id, "true")
	_, derr := c.api.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id, Force: true}))
	if derr != nil {
		// The probe's sandbox must not stay: the checks would call it a leak.
		c.led.created(id, "probe", nil)
		c.led.update(id, func(r *sbRec) { r.deleteTried = true })
	}
	return errors.Join(xerr, derr)
}

// chaosStats counts calls, errors by kind and recoveries.
type chaosStats struct {
	mu       sync.Mutex
	calls    map[string]int
	errs     map[string]int
	slowest  map[string]time.Duration
	faults   map[string][]time.Duration
	firstErr map[string]string
	// acked: calls that returned success, by op; auditWant: audit lines
	// they call for, by method (checkAudit).
	acked, auditWant map[string]int
}

func newChaosStats() *chaosStats {
	return &chaosStats{calls: map[string]int{}, errs: map[string]int{}, slowest: map[string]time.Duration{},
		faults: map[string][]time.Duration{}, firstErr: map[string]string{},
		acked: map[string]int{}, auditWant: map[string]int{}}
}

// call counts one call. A call the harness itself ended (the run's end, a
// cancelled stream) is not an error of boxd's.
func (s *chaosStats) call(op string, err error, d time.Duration, ours bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	if d > s.slowest[op] {
		s.slowest[op] = d
	}
	if err == nil {
		s.acked[op]++
	}
	if err == nil || ours {
		return
	}
	kind := connect.CodeOf(err).String()
	if d >= chaosCallBound {
		kind = "HUNG past the bound"
	}
	k := op + ": " + kind
	s.errs[k]++
	if s.firstErr[k] == "" {
		s.firstErr[k] = err.Error()
	}
}

func (s *chaosStats) survived(name string, rec time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[name] = append(s.faults[name], rec)
}

func (s *chaosStats) report(clients int, took time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: %d clients, %s\nfaults survived (count, time to recover: max):\n", clients, took.Round(time.Second))
	for _, k := range sortedKeys(s.faults) {
		rs := s.faults[k]
		sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
		fmt.Fprintf(&b, "  %-28s %3d  %s\n", k, len(rs), rs[len(rs)-1].Round(time.Millisecond))
	}
	b.WriteString("calls (count, slowest):\n")
	for _, k := range sortedKeys(s.calls) {
		fmt.Fprintf(&b, "  %-28s %5d  %s\n", k, s.calls[k], s.slowest[k].Round(time.Millisecond))
	}
	b.WriteString("errors by kind (first message):\n")
	for _, k := range sortedKeys(s.errs) {
		fmt.Fprintf(&b, "  %-44s %4d  %s\n", k, s.errs[k], oneLineErr(s.firstErr[k]))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func oneLineErr(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func (c *chaosEnv) killInit() error {
	r := c.led.pick(c.intn)
	if r == nil {
		return errors.New("no sandbox")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := c.api.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: r.id}))
	if err != nil {
		return err
	}
	if g.Msg.Sandbox.InitPid <= 0 {
		return fmt.Errorf("sandbox %s has no init pid", r.id)
	}
	return syscall.Kill(int(g.Msg.Sandbox.InitPid), syscall.SIGKILL)
}
