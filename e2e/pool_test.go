//go:build linux

package e2e

import (
	"context"
	"encoding/json"
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
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
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
			"--default-image", testImage, "--warm-pool", testImage+"=2", "--expiry-interval", "300ms")
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
	// The pid the create answers with is the one this boxd kept from the
	// member's start; inspect asks the task.
	if sb.InitPid == 0 || sb.InitPid != g.InitPid {
		t.Errorf("adoption answered init pid %d, inspect %d", sb.InitPid, g.InitPid)
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

	// A request the pool cannot serve (its own cpu weight) is created cold.
	cold, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{CpuWeight: 200}))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(members, cold.Msg.Sandbox.Id) {
		t.Errorf("a create with a cpu weight was served from the pool")
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
	// A member taken back is read from containerd at adoption (the
	// restarted boxd did not start it): it is handed out with its own
	// init pid, its limits applied and answering.
	back, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{
		Limits: &boxdv1.Limits{Memory: "96m"}, Name: "taken-back",
	}))
	if err != nil {
		t.Fatal(err)
	}
	bs := back.Msg.Sandbox
	if !slices.Contains(after, bs.Id) {
		t.Fatalf("create after the restart got %s, not one of the members taken back %v", bs.Id, after)
	}
	gb, err := api.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: "taken-back"}))
	if err != nil {
		t.Fatal(err)
	}
	if bs.InitPid == 0 || bs.InitPid != gb.Msg.Sandbox.InitPid || gb.Msg.Sandbox.MemoryBytes != 96<<20 || gb.Msg.Sandbox.State != "running" {
		t.Errorf("adopted after restart: create said pid %d, inspect %+v", bs.InitPid, gb.Msg.Sandbox)
	}
	if mem, _, _ := cgroupLimitsNS(t, ns, bs.Id); mem != 96<<20 {
		t.Errorf("kernel memory limit after adopting a member taken back: %d", mem)
	}
	if ex, err := api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: "taken-back", Args: []string{"echo", "ok"}})); err != nil || string(ex.Msg.Stdout) != "ok\n" {
		t.Errorf("exec in a member adopted after restart: %v %q", err, ex.Msg.GetStdout())
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

// poolDaemon starts a boxd of its own on namespace ns with extra flags,
// imports the test image and returns its socket and log directory.
func poolDaemon(t *testing.T, ns string, extra ...string) (sock, dir string, kill func() *exec.Cmd, c context.Context) {
	t.Helper()
	dir = t.TempDir()
	_ = os.Chmod(dir, 0o711)
	sock = filepath.Join(dir, "run", "boxd.sock")
	var daemon *exec.Cmd
	start := func() *exec.Cmd {
		args := append([]string{"--socket", sock, "--containerd", env.ctrd.Address, "--namespace", ns,
			"--state-dir", filepath.Join(dir, "state"), "--init-binary", env.initBin, "--runc", testenv.Runc,
			"--default-image", testImage, "--expiry-interval", "300ms", "--debug"}, extra...)
		cmd := exec.Command(env.boxd, args...)
		logf, _ := os.OpenFile(filepath.Join(dir, "boxd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		logf.Close()
		daemon = cmd
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := rpcclient.New(sock).ListImages(context.Background(), connect.NewRequest(&boxdv1.ListImagesRequest{})); err == nil {
				return cmd
			}
			if time.Now().After(deadline) {
				t.Fatalf("boxd did not start:\n%s", tail(filepath.Join(dir, "boxd.log")))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	start()
	c = namespaces.WithNamespace(ctx(t), ns)
	t.Cleanup(func() {
		_ = daemon.Process.Kill()
		_, _ = daemon.Process.Wait()
		destroyAll(t, c)
		// runsc's null-netns pin of a gVisor member's state root, or the
		// directory cannot be removed.
		if err := testenv.ReleaseGvisorRoots(dir); err != nil {
			t.Errorf("release gVisor roots: %v", err)
		}
	})
	if out, err := exec.Command(env.boxctl, "--socket", sock, "image", "import", "--rootfs", env.busybox, "--name", testImage).CombinedOutput(); err != nil {
		t.Fatalf("import: %v %s", err, out)
	}
	// kill SIGKILLs boxd and starts it again.
	kill = func() *exec.Cmd {
		_ = daemon.Process.Signal(syscall.SIGKILL)
		_, _ = daemon.Process.Wait()
		return start()
	}
	return sock, dir, kill, c
}

// TestPoolAdoptionSameAsCold: a create with its own env, workdir, labels,
// limits, memory protection, name and ttl served by a pool member gives
// the sandbox a cold create of the same request gives: inspect equal but
// for ids, names and times, the same limits in the kernel, the same
// environment and working directory in commands, the same events.
func TestPoolAdoptionSameAsCold(t *testing.T) {
	sock, dir, _, c := poolDaemon(t, namespace+"-pooleq", "--warm-pool", "1")
	api := rpcclient.New(sock)
	members := waitPool(t, c, 1, dir)
	req := func(name string, cold bool) *boxdv1.CreateSandboxRequest {
		return &boxdv1.CreateSandboxRequest{
			Limits: &boxdv1.Limits{Memory: "96m", Pids: 40, Cpus: 0.25}, Env: []string{"A=1", "PATH=/bin:/usr/bin", "HOSTNAME=mine"},
			Workdir: "/srv/app", Labels: map[string]string{"team": "x"}, Name: name, Ttl: "7m", MemoryLow: "8m",
			ExecTimeout: "30s", OutputLimit: 4096, IdleTimeout: "10m", OnIdle: "delete", Cold: cold,
		}
	}
	got := createPooledAndCold(t, c, api, members, req)
	// Both share a shim, and their records say which, so its place is
	// given back when they go and counted after a restart (a hand-out
	// used to drop it from the record).
	for _, sb := range got {
		ct, err := env.ctr.LoadContainer(c, sb.Id)
		if err != nil {
			t.Fatal(err)
		}
		labels, err := ct.Labels(c)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			ShimGroup string `json:"shim_group"`
		}
		if err := json.Unmarshal([]byte(labels[runtime.LabelSandbox]), &rec); err != nil || rec.ShimGroup == "" {
			t.Errorf("%s (%s): no shim group in its record (%v)", sb.Id, sb.Name, err)
		}
	}
	if d := mustTime(t, got[0].ExpiresAt).Sub(mustTime(t, got[0].CreatedAt)); d != 7*time.Minute {
		t.Errorf("pooled ttl = %v", d)
	}
	var seen []string
	for _, sb := range got {
		mem, pids, quota := cgroupLimitsNS(t, namespace+"-pooleq", sb.Id)
		low := memoryLow(t, namespace+"-pooleq", sb.Id)
		ex, err := api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: sb.Id, Args: []string{"sh", "-c", "pwd; env | grep -v ^HOSTNAME= | sort; echo host=$HOSTNAME"}}))
		if err != nil {
			t.Fatal(err)
		}
		out := strings.ReplaceAll(string(ex.Msg.Stdout), sb.Id, "ID")
		seen = append(seen, fmt.Sprintf("mem %d pids %d quota %d low %d\n%s", mem, pids, quota, low, out))
	}
	if seen[0] != seen[1] {
		t.Errorf("inside the sandboxes:\npool %s\ncold %s", seen[0], seen[1])
	}
	if !strings.Contains(seen[0], "mem 100663296 pids 40 quota 25000 low 8388608\n/srv/app\n") || !strings.Contains(seen[0], "A=1\n") || !strings.Contains(seen[0], "host=ID\n") {
		t.Errorf("pooled sandbox from inside: %s", seen[0])
	}
	// Both names are taken the same way; a quota-free caller sees both.
	if _, err := api.CreateSandbox(c, connect.NewRequest(req("pooled", false))); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("second create named pooled: %v, want already_exists", err)
	}
	stream, err := rpcclient.NewEvents(sock).Events(c, connect.NewRequest(&boxdv1.EventsRequest{Since: "10m"}))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string][]string{}
	for stream.Receive() {
		if e := stream.Msg().Event; e != nil {
			types[e.Sandbox] = append(types[e.Sandbox], e.Type)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// exec events come from the exec above, one each.
	if a, b := fmt.Sprint(types[got[0].Id]), fmt.Sprint(types[got[1].Id]); a != b || !strings.HasPrefix(a, "[created started") {
		t.Errorf("events: pool %s, cold %s", a, b)
	}
	for id := range types {
		if id != got[0].Id && id != got[1].Id {
			t.Errorf("events about %s, which no client created (a pool member?): %v", id, types[id])
		}
	}
}

// createPooledAndCold creates the sandbox req describes twice: "pooled",
// which must be handed one of the pool's members, and "cold" (Cold set),
// which must not. What create answered for the two, and what inspect shows
// of them afterwards, must be alike (normSandbox); it returns the
// inspected pair, pooled first.
func createPooledAndCold(t *testing.T, c context.Context, api boxdv1connect.SandboxServiceClient, members []string, req func(name string, cold bool) *boxdv1.CreateSandboxRequest) []*boxdv1.Sandbox {
	t.Helper()
	pooled, err := api.CreateSandbox(c, connect.NewRequest(req("pooled", false)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(members, pooled.Msg.Sandbox.Id) {
		t.Fatalf("create got %s (runtime %s), not the member %v", pooled.Msg.Sandbox.Id, pooled.Msg.Sandbox.Runtime, members)
	}
	cold, err := api.CreateSandbox(c, connect.NewRequest(req("cold", true)))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(members, cold.Msg.Sandbox.Id) {
		t.Fatal("a create with cold set took a pool member")
	}
	if a, b := normSandbox(pooled.Msg.Sandbox), normSandbox(cold.Msg.Sandbox); a != b {
		t.Errorf("create answers differ:\npool %s\ncold %s", a, b)
	}
	var got []*boxdv1.Sandbox
	for _, id := range []string{"pooled", "cold"} {
		g, err := api.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, g.Msg.Sandbox)
	}
	if a, b := normSandbox(got[0]), normSandbox(got[1]); a != b {
		t.Errorf("inspect differs:\npool %s\ncold %s", a, b)
	}
	return got
}

// normSandbox is a sandbox's inspect without what differs between two
// sandboxes made from the same request (ids, names, times, uid block,
// hostname, live use), to compare a pooled create with a cold one.
func normSandbox(sb *boxdv1.Sandbox) string {
	sb = proto.Clone(sb).(*boxdv1.Sandbox)
	sb.Id, sb.Name, sb.CreatedAt, sb.ExpiresAt, sb.InitPid, sb.LastActivityAt = "", "", "", "", 0, ""
	// Each sandbox has its own uid block, and its id is its hostname.
	sb.Security.UidMap, sb.Hostname = "", ""
	// Each egress sandbox has its own address.
	if sb.Network != nil {
		sb.Network.Address = ""
	}
	// A published port's free host port is the kernel's choice.
	for _, p := range sb.Ports {
		p.HostPort = 0
	}
	// Live use differs from moment to moment; the limit must not.
	if u := sb.Usage; u != nil {
		u.MemoryBytes, u.MemoryPeakBytes, u.CpuUsec, u.Pids, u.BlockReadBytes, u.BlockWriteBytes = 0, 0, 0, 0, 0, 0
	}
	for i, e := range sb.Env {
		if strings.HasPrefix(e, "HOSTNAME=") {
			sb.Env[i] = "HOSTNAME=?"
		}
	}
	return protojson.Format(sb)
}

// TestPoolResizeAndNoReuse: pool sizes change at run time through the API
// (boxctl pool set/ls); concurrent creates each get a member of their own,
// never one twice; the pool refills; a member handed out and deleted is
// gone for good.
func TestPoolResizeAndNoReuse(t *testing.T) {
	sock, dir, _, c := poolDaemon(t, namespace+"-poolsz", "--warm-pool", "0")
	api := rpcclient.New(sock)
	pools := rpcclient.NewPool(sock)
	if _, err := pools.SetPoolSize(c, connect.NewRequest(&boxdv1.SetPoolSizeRequest{Image: "no/such:image", Size: 1})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("pool of a missing image: %v, want not_found", err)
	}
	if _, err := pools.SetPoolSize(c, connect.NewRequest(&boxdv1.SetPoolSizeRequest{Size: -1})); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "size") {
		t.Errorf("negative size: %v, want invalid_argument naming size", err)
	}
	if out, err := exec.Command(env.boxctl, "--socket", sock, "pool", "set", testImage, "4").CombinedOutput(); err != nil {
		t.Fatalf("boxctl pool set: %v %s", err, out)
	}
	first := waitPool(t, c, 4, dir)
	out, err := exec.Command(env.boxctl, "--socket", sock, "pool", "ls").CombinedOutput()
	if err != nil || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), "SIZE READY STARTING RUNTIME NETWORK HANDED OUT COLD (EMPTY) COLD (UNFIT) "+testImage+" 4 4 0 runc none ") {
		t.Errorf("boxctl pool ls: %v\n%s", err, out)
	}
	// Eight creates at once: four from the pool, the rest cold or from
	// members started meanwhile; each id once.
	ids := make([]string, 8)
	errs := make([]error, 8)
	done := make(chan int)
	for i := range ids {
		go func() {
			r, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Env: []string{fmt.Sprintf("N=%d", i)}}))
			if err == nil {
				ids[i] = r.Msg.Sandbox.Id
			}
			errs[i] = err
			done <- i
		}()
	}
	for range ids {
		<-done
	}
	fromPool := 0
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if slices.Index(ids, id) != i {
			t.Errorf("sandbox %s handed out twice: %v", id, ids)
		}
		if slices.Contains(first, id) {
			fromPool++
		}
		ex, err := api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "echo $N"}}))
		if err != nil || string(ex.Msg.Stdout) != fmt.Sprintf("%d\n", i) {
			t.Errorf("sandbox %d sees N=%q (%v)", i, ex.Msg.GetStdout(), err)
		}
	}
	if fromPool != 4 {
		t.Errorf("%d of 8 creates took the 4 ready members, want all 4", fromPool)
	}
	// Refilled with new members, none of them a sandbox handed out.
	refilled := waitPool(t, c, 4, dir)
	for _, id := range refilled {
		if slices.Contains(ids, id) {
			t.Errorf("member %s was handed out before", id)
		}
	}
	// Deleted sandboxes never come back as members.
	for _, id := range ids {
		if _, err := api.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id, Force: true})); err != nil {
			t.Fatal(err)
		}
	}
	// Shrink, then off.
	if _, err := pools.SetPoolSize(c, connect.NewRequest(&boxdv1.SetPoolSizeRequest{Image: testImage, Size: 1})); err != nil {
		t.Fatal(err)
	}
	waitPool(t, c, 1, dir)
	if _, err := pools.SetPoolSize(c, connect.NewRequest(&boxdv1.SetPoolSizeRequest{Size: 0})); err != nil {
		t.Fatal(err)
	}
	waitPool(t, c, 0, dir)
	ls, err := pools.ListPools(c, connect.NewRequest(&boxdv1.ListPoolsRequest{}))
	if err != nil || len(ls.Msg.Pools) != 0 {
		t.Errorf("pools after emptying: %v %v", ls.Msg.GetPools(), err)
	}
}

// TestBackgroundDelete: a background delete (what boxctl run does) frees
// the name at once and tears everything down; one cut short by a SIGKILL
// of boxd is finished by the next boxd.
func TestBackgroundDelete(t *testing.T) {
	ns := namespace + "-bgdel"
	sock, dir, restart, c := poolDaemon(t, ns, "--warm-pool", "1")
	api := rpcclient.New(sock)
	waitPool(t, c, 1, dir)
	gone := func(id string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := env.ctr.LoadContainer(c, id)
			_, serr := os.Stat(filepath.Join(dir, "state", "sandboxes", id))
			if err != nil && os.IsNotExist(serr) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s not torn down: container %v, state dir %v", id, err, serr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for round, kill := range []bool{false, true} {
		r, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Name: "job"}))
		if err != nil {
			t.Fatal(err)
		}
		id := r.Msg.Sandbox.Id
		if _, err := api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "sleep 1000 & echo x > /workspace/f"}})); err != nil {
			t.Fatal(err)
		}
		if _, err := api.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: "job", Background: true, Force: true})); err != nil {
			t.Fatal(err)
		}
		if kill {
			restart()
		}
		if _, err := api.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("round %d: inspect right after a background delete: %v, want not_found", round, err)
		}
		list, err := api.ListSandboxes(c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
		if err != nil || len(list.Msg.Sandboxes) != 0 {
			t.Errorf("round %d: list after a background delete: %v %v", round, list.Msg.GetSandboxes(), err)
		}
		gone(id)
		// The name is free, and the next sandbox starts clean.
		r2, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Name: "job"}))
		if err != nil {
			t.Fatalf("round %d: reuse the name: %v", round, err)
		}
		ex, err := api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: r2.Msg.Sandbox.Id, Args: []string{"sh", "-c", `ls /workspace; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done | grep -cx 'sleep 1000 ' || true`}}))
		if err != nil || string(ex.Msg.Stdout) != "0\n" { // no file, no sleep
			t.Errorf("round %d: new sandbox sees %q (%v)", round, ex.Msg.GetStdout(), err)
		}
		if _, err := api.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: "job", Force: true})); err != nil {
			t.Fatal(err)
		}
	}
}

// memoryLow reads a sandbox's memory protection: memory.low on cgroup v2,
// the soft limit on v1.
func memoryLow(t *testing.T, ns, id string) int64 {
	rel := "/" + ns + "/" + id
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return readInt(t, "/sys/fs/cgroup"+rel+"/memory.low")
	}
	return readInt(t, "/sys/fs/cgroup/memory"+rel+"/memory.soft_limit_in_bytes")
}
