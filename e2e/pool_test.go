//go:build linux

package e2e

import (
	"context"
	"fmt"
	"github.com/boxd-dev/boxd/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	rpcclient "github.com/boxd-dev/boxd/rpc/client"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

// TestWarmPool: with --warm-pool, creates that fit are served by idle
// members, which take the requested limits, labels and ttl; the pool
// refills; a restarted boxd takes its members back instead of leaking them.
func TestWarmPool(t *testing.T) {
	const ns = namespace + "-pool"
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o711)
	sock := filepath.Join(dir, "run", "boxd.sock")
	start := func() *exec.Cmd {
		cmd := exec.Command(env.boxd, "--socket", sock, "--containerd", env.ctrd.Address, "--namespace", ns,
			"--state-dir", filepath.Join(dir, "state"), "--init-binary", env.initBin, "--runc", testenv.Runc,
			"--default-image", testImage, "--warm-pool", "2", "--expiry-interval", "300ms")
		logf, _ := os.OpenFile(filepath.Join(dir, "boxd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		return cmd
	}
	daemon := start()
	c := namespaces.WithNamespace(ctx(t), ns)
	t.Cleanup(func() {
		_ = daemon.Process.Kill()
		_, _ = daemon.Process.Wait()
		destroyAll(t, c)
	})
	api := rpcclient.New(sock)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := api.ListImages(c, connect.NewRequest(&boxdv1.ListImagesRequest{})); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool boxd did not start:\n%s", tail(filepath.Join(dir, "boxd.log")))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := exec.Command(env.boxctl, "--socket", sock, "image", "import", "--rootfs", env.busybox, "--name", testImage).CombinedOutput(); err != nil {
		t.Fatalf("import: %v %s", err, out)
	}
	members := waitPool(t, c, 2, dir)

	resp, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{
		Limits: &boxdv1.Limits{Memory: "64m", Pids: 32, Cpus: 0.5}, Labels: map[string]string{"via": "pool"}, Name: "pooled", Ttl: "5m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	sb := resp.Msg.Sandbox
	if !slices.Contains(members, sb.Id) {
		t.Fatalf("create fitting the pool got %s, not one of the members %v", sb.Id, members)
	}
	got, err := api.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: "pooled"}))
	if err != nil {
		t.Fatal(err)
	}
	g := got.Msg.Sandbox
	if g.MemoryBytes != 64<<20 || g.Pids != 32 || g.Labels["via"] != "pool" || g.State != "running" {
		t.Errorf("adopted sandbox = %+v", g)
	}
	if ttl := mustTime(t, g.ExpiresAt).Sub(mustTime(t, g.CreatedAt)); ttl != 5*time.Minute {
		t.Errorf("ttl = %v", ttl)
	}
	mem, pids, quota := cgroupLimitsNS(t, ns, sb.Id)
	if mem != 64<<20 || pids != 32 || quota != 50000 {
		t.Errorf("kernel limits after adoption: memory %d pids %d quota %d", mem, pids, quota)
	}
	ex, err := api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: "pooled", Args: []string{"sh", "-c", "echo $HOSTNAME; pwd"}}))
	if err != nil || string(ex.Msg.Stdout) != sb.Id+"\n/workspace\n" {
		t.Errorf("exec in adopted sandbox: %v %q", err, ex.Msg.GetStdout())
	}
	list, _ := api.ListSandboxes(c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	if n := len(list.Msg.Sandboxes); n != 1 {
		t.Errorf("list shows %d sandboxes, want only the adopted one (members stay hidden)", n)
	}

	// A request the pool cannot serve (its own env) is created cold.
	cold, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Env: []string{"A=1"}}))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(members, cold.Msg.Sandbox.Id) {
		t.Errorf("a create with env was served from the pool")
	}

	// The pool refills, and a boxd killed and restarted reuses its members.
	before := waitPool(t, c, 2, dir)
	_ = daemon.Process.Signal(syscall.SIGKILL)
	_, _ = daemon.Process.Wait()
	daemon = start()
	time.Sleep(2 * time.Second)
	after := waitPool(t, c, 2, dir)
	slices.Sort(before)
	slices.Sort(after)
	if !slices.Equal(before, after) {
		t.Errorf("members before restart %v, after %v: want the same ones taken back", before, after)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitPool waits until exactly n members exist, each with a running init
// and its agent socket made, and returns their ids.
func waitPool(t *testing.T, c context.Context, n int, dir string) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctrs, err := env.ctr.Containers(c, fmt.Sprintf(`labels."%s"`, runtime.LabelPool))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ct := range ctrs {
			task, err := ct.Task(c, nil)
			if err != nil {
				continue
			}
			st, err := task.Status(c)
			// The init writes "serving" once it has its listener from the
			// hand-off: a member still starting has a socket and a running
			// task already, and one killed with boxd then is not taken
			// back.
			initLog, serr := os.ReadFile(filepath.Join(dir, "state", "sandboxes", ct.ID(), "init.log"))
			if err == nil && st.Status == client.Running && serr == nil && strings.Contains(string(initLog), "boxd-init: serving") {
				ids = append(ids, ct.ID())
			}
		}
		if len(ids) == n && len(ctrs) == n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool has %d members, want %d", len(ids), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// destroyAll removes every container of a test's own namespace.
func destroyAll(t *testing.T, c context.Context) {
	ctrs, _ := env.ctr.Containers(c)
	for _, ct := range ctrs {
		if task, err := ct.Task(c, nil); err == nil {
			_, _ = task.Delete(c, client.WithProcessKill)
		}
		if err := ct.Delete(c, client.WithSnapshotCleanup); err != nil {
			t.Errorf("cleanup %s: %v", ct.ID(), err)
		}
	}
}
