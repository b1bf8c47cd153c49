//go:build linux

package e2e

// The chaos harness: a boxd and a containerd of its own, their state on a
// small loop-mounted filesystem the harness makes (so it can fill that and
// nothing else), a mixed workload of several clients per core, and faults
// injected at random moments: SIGKILL of boxd, containerd, a shim, a
// sandbox's init, a client mid-stream; SIGSTOP of boxd; a full state disk.
// After each fault the workload pauses, the harness waits for boxd to
// answer again and checks the invariants (chaos_check_test.go).
//
// BOXD_CHAOS_BUDGET (a Go duration, default 90s: the small run of `make
// test`; `make chaos` gives it 10m) bounds the faults phase;
// BOXD_CHAOS_SEED repeats a run's random choices.

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

const (
	chaosNS   = "boxd-chaos"
	chaosPool = 2
	// chaosDisk is the size of the filesystem holding boxd's state and
	// containerd's root: room for the image and a few dozen sandboxes'
	// writes (their disk images are sparse), small enough to fill fast.
	chaosDisk = "2G"
	// chaosCallBound: a call that takes longer has hung, whatever the fault.
	chaosCallBound = 90 * time.Second
)

// chaosEnv is one harness run: the daemons, their directories, the
// clients, the random source and what the run counted.
type chaosEnv struct {
	t                 *testing.T
	seed              int64
	dir, mnt          string
	sock, state, blog string
	ctrd              *testenv.Containerd
	ctr               *client.Client
	cctx              context.Context // containerd calls, in chaosNS

	mu     sync.Mutex
	rng    *rand.Rand
	daemon *exec.Cmd

	api    boxdv1connect.SandboxServiceClient
	files  boxdv1connect.FileServiceClient
	events boxdv1connect.EventServiceClient
	pools  boxdv1connect.PoolServiceClient

	led   *ledger
	stats *chaosStats
}

func chaosBudget(t *testing.T) time.Duration {
	s := os.Getenv("BOXD_CHAOS_BUDGET")
	if s == "" {
		return 90 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("BOXD_CHAOS_BUDGET=%q: want a positive Go duration", s)
	}
	return d
}

func chaosSeed(t *testing.T) int64 {
	if s := os.Getenv("BOXD_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("BOXD_CHAOS_SEED=%q: want an integer", s)
		}
		return n
	}
	return time.Now().UnixNano()
}

// intn is the run's random choice, safe from every goroutine.
func (c *chaosEnv) intn(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Intn(n)
}

// newChaosEnv makes the loop filesystem, starts containerd and boxd on it
// and imports the test image.
func newChaosEnv(t *testing.T, seed int64) *chaosEnv {
	c := &chaosEnv{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), led: newLedger(), stats: newChaosStats()}
	// Not t.TempDir: its parent is 0700, and a sandbox's root (uid 200000
	// on the host) must get through every directory to its rootfs.
	var err error
	if c.dir, err = os.MkdirTemp("", "boxd-chaos-"); err != nil {
		t.Fatal(err)
	}
	must(t, os.Chmod(c.dir, 0o711))
	c.mnt = filepath.Join(c.dir, "disk")
	img := filepath.Join(c.dir, "disk.img")
	must(t, os.MkdirAll(c.mnt, 0o711))
	for _, args := range [][]string{{"truncate", "-s", chaosDisk, img}, {"mkfs.ext4", "-q", "-F", "-m", "0", img}, {"mount", "-o", "loop", img, c.mnt}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(c.teardown)
	must(t, os.Chmod(c.mnt, 0o711))
	ctrdDir := filepath.Join(c.mnt, "ctrd")
	must(t, os.MkdirAll(ctrdDir, 0o711))
	if c.ctrd, err = testenv.StartContainerdIn(ctrdDir); err != nil {
		t.Fatal(err)
	}
	if c.ctr, err = client.New(c.ctrd.Address, client.WithDefaultNamespace(chaosNS)); err != nil {
		t.Fatal(err)
	}
	c.cctx = namespaces.WithNamespace(context.Background(), chaosNS)
	c.sock = filepath.Join(c.dir, "run", "boxd.sock")
	c.state = filepath.Join(c.mnt, "state")
	c.blog = filepath.Join(c.dir, "boxd.log") // off the small disk: the log outlives a full one
	c.api, c.files = rpcclient.New(c.sock), rpcclient.NewFiles(c.sock)
	c.events, c.pools = rpcclient.NewEvents(c.sock), rpcclient.NewPool(c.sock)
	if err := c.startBoxd(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(env.boxctl, "--socket", c.sock, "image", "import", "--rootfs", env.busybox, "--name", testImage).CombinedOutput(); err != nil {
		t.Fatalf("import: %v %s", err, out)
	}
	return c
}

// startBoxd starts boxd and waits until it answers a call.
func (c *chaosEnv) startBoxd() error {
	cmd := exec.Command(env.boxd, "--socket", c.sock, "--containerd", c.ctrd.Address, "--namespace", chaosNS,
		"--state-dir", c.state, "--init-binary", env.initBin, "--runc", testenv.Runc, "--default-image", testImage,
		"--expiry-interval", "500ms", "--warm-pool", strconv.Itoa(chaosPool), "--debug")
	logf, err := os.OpenFile(c.blog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.daemon = cmd
	c.mu.Unlock()
	go func() { _ = cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.api.ListImages(ctx, connect.NewRequest(&boxdv1.ListImagesRequest{}))
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("boxd did not answer within 60 s:\n%s", tail(c.blog))
}

func (c *chaosEnv) boxdPid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.daemon == nil || c.daemon.Process == nil {
		return 0
	}
	return c.daemon.Process.Pid
}

// killBoxd SIGKILLs boxd and waits until it is gone.
func (c *chaosEnv) killBoxd() {
	pid := c.boxdPid()
	if pid == 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 200 && !procExited(pid); i++ {
		time.Sleep(25 * time.Millisecond)
	}
}

// procExited: no such process, or a zombie.
func procExited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] == 'Z'
	}
	return false
}

// teardown stops boxd (deleting what is left through it first, so that
// its own cleanup runs), containerd, and unmounts the small disk.
func (c *chaosEnv) teardown() {
	if c.boxdPid() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if l, err := c.api.ListSandboxes(ctx, connect.NewRequest(&boxdv1.ListSandboxesRequest{All: true})); err == nil {
			for _, sb := range l.Msg.Sandboxes {
				_, _ = c.api.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: sb.Id}))
			}
		}
		_, _ = c.pools.SetPoolSize(ctx, connect.NewRequest(&boxdv1.SetPoolSizeRequest{Size: 0}))
		cancel()
		if pid := c.boxdPid(); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			for i := 0; i < 400 && !procExited(pid); i++ {
				time.Sleep(25 * time.Millisecond)
			}
			c.killBoxd()
		}
	}
	if c.ctr != nil {
		c.ctr.Close()
	}
	if c.ctrd != nil {
		if err := c.ctrd.Stop(); err != nil {
			c.t.Errorf("stop containerd: %v", err)
		}
	}
	if err := testenv.ReleaseGvisorRoots(c.dir); err != nil {
		c.t.Errorf("release: %v", err)
	}
	if out, err := exec.Command("umount", c.mnt).CombinedOutput(); err != nil {
		c.t.Errorf("umount %s: %v: %s", c.mnt, err, out)
		return
	}
	if c.t.Failed() {
		c.t.Logf("boxd log tail:\n%s", tail(c.blog))
	}
	if mps, err := testenv.MountsUnder(c.dir); err == nil && len(mps) == 0 && !c.t.Failed() {
		_ = os.RemoveAll(c.dir)
	} else if c.t.Failed() {
		c.t.Logf("kept %s for inspection", c.dir)
	}
}

// TestChaos runs the workload and injects faults for the budget, checking
// the invariants after each, then once more at the end.
func TestChaos(t *testing.T) {
	seed, budget := chaosSeed(t), chaosBudget(t)
	t.Logf("chaos seed %d, budget %s (BOXD_CHAOS_SEED=%d BOXD_CHAOS_BUDGET=%s repeats the run's choices)", seed, budget, seed, budget)
	c := newChaosEnv(t, seed)
	start := time.Now()
	go c.followEvents(start)
	clients := 2 * goruntime.NumCPU()
	w := c.startWorkload(clients)
	faults := c.faultOrder()
	for i := 0; time.Since(start) < budget; i++ {
		w.run(time.Duration(2000+c.intn(4000)) * time.Millisecond)
		f := faults[i%len(faults)]
		c.inject(f, w)
		w.pause()
		rec, err := c.recover()
		if err != nil {
			t.Errorf("after %s: did not recover: %v", f.name, err)
			break
		}
		c.stats.survived(f.name, rec)
		c.checkAll(f.name)
	}
	w.stop()
	c.checkAll("end")
	c.checkEventsAndAudit()
	t.Log(c.stats.report(clients, time.Since(start)))
	for k, n := range c.stats.errs {
		if strings.HasSuffix(k, "HUNG past the bound") {
			t.Errorf("%d calls hung past %s: %s", n, chaosCallBound, k)
		}
	}
	t.Logf("chaos seed %d", seed)
}
