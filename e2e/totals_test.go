//go:build linux

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/boxd-dev/boxd/internal/testenv"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/cgroups/v3"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// daemon is a second boxd with its own namespace, socket and flags.
type daemon struct {
	dir, sock, ns string
	args          []string
	cmd           *exec.Cmd
	c             context.Context
	api           interface {
		CreateSandbox(context.Context, *connect.Request[boxdv1.CreateSandboxRequest]) (*connect.Response[boxdv1.CreateSandboxResponse], error)
		DeleteSandbox(context.Context, *connect.Request[boxdv1.DeleteSandboxRequest]) (*connect.Response[boxdv1.DeleteSandboxResponse], error)
		ListSandboxes(context.Context, *connect.Request[boxdv1.ListSandboxesRequest]) (*connect.Response[boxdv1.ListSandboxesResponse], error)
		GetSandbox(context.Context, *connect.Request[boxdv1.GetSandboxRequest]) (*connect.Response[boxdv1.GetSandboxResponse], error)
		Exec(context.Context, *connect.Request[boxdv1.ExecRequest]) (*connect.Response[boxdv1.ExecResponse], error)
	}
}

// startBoxd starts boxd in namespace ns with extra flags, imports the test
// image when image is set, and stops and cleans up when the test ends.
func startBoxd(t *testing.T, ns string, image bool, flags ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o711)
	d := &daemon{dir: dir, sock: filepath.Join(dir, "run", "boxd.sock"), ns: ns}
	d.args = append([]string{"--socket", d.sock, "--containerd", env.ctrd.Address, "--namespace", ns,
		"--state-dir", filepath.Join(dir, "state"), "--init-binary", env.initBin, "--runc", testenv.Runc,
		"--default-image", testImage, "--expiry-interval", "300ms", "--debug"}, flags...)
	if !slices.Contains(flags, "--warm-pool") {
		d.args = append(d.args, "--warm-pool", "0") // no default pool unless the test wants one
	}
	d.c = namespaces.WithNamespace(ctx(t), ns)
	d.api = rpcclient.New(d.sock)
	t.Cleanup(func() {
		d.kill()
		destroyAll(t, d.c)
		// A stopped boxd leaves its volumes mounted (the next start
		// finds them); the test's directory goes with the test.
		detachVolumes(t, d)
		// runsc's null-netns pin of a gVisor sandbox's state root, or the
		// directory cannot be removed.
		if err := testenv.ReleaseGvisorRoots(dir); err != nil {
			t.Errorf("release gVisor roots: %v", err)
		}
		if t.Failed() {
			t.Logf("boxd log:\n%s", tail(filepath.Join(dir, "boxd.log")))
		}
	})
	d.start(t)
	if image {
		if out, err := exec.Command(env.boxctl, "--socket", d.sock, "image", "import", "--rootfs", env.busybox, "--name", testImage).CombinedOutput(); err != nil {
			t.Fatalf("import: %v %s", err, out)
		}
	}
	return d
}

func (d *daemon) start(t *testing.T) {
	t.Helper()
	d.cmd = exec.Command(env.boxd, d.args...)
	logf, _ := os.OpenFile(filepath.Join(d.dir, "boxd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := d.api.ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{})); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("boxd %v did not start:\n%s", d.args, tail(filepath.Join(d.dir, "boxd.log")))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill SIGKILLs boxd, as a crash would.
func (d *daemon) kill() {
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Kill()
		_, _ = d.cmd.Process.Wait()
	}
}

func (d *daemon) boxctl(args ...string) (string, string, int) { return boxctlAt(d.sock, args...) }

// wantCodeAll checks err has code and mentions every word.
func wantCodeAll(t *testing.T, what string, err error, code connect.Code, words ...string) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Errorf("%s: %v (code %v), want %v", what, err, connect.CodeOf(err), code)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v does not mention %q", what, err, w)
		}
	}
}

// TestPoolMemberUnreachable: a warm-pool member's id, read from containerd
// as a snooping socket user could guess or learn it, reaches nothing until
// a create hands the member out. Before the fix the exec fast path used
// any id whose channel socket existed.
func TestPoolMemberUnreachable(t *testing.T) {
	d := startBoxd(t, namespace+"-hidden", true, "--warm-pool", "1")
	members := waitPool(t, d.c, 1, d.dir)
	id := members[0]
	files := rpcclient.NewFiles(d.sock)
	procs := rpcclient.NewProcess(d.sock)
	sb := rpcclient.New(d.sock)

	try := func() map[string]error {
		errs := map[string]error{}
		_, errs["exec"] = d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}))
		if st, err := files.ReadFile(d.c, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: id, Path: "/etc/passwd"})); err != nil {
			errs["file read"] = err
		} else {
			for st.Receive() {
			}
			errs["file read"] = st.Err()
			st.Close()
		}
		_, errs["file stat"] = files.StatFile(d.c, connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: id, Path: "/"}))
		_, errs["process start"] = procs.Start(d.c, connect.NewRequest(&boxdv1.StartProcessRequest{Spec: &boxdv1.ProcessSpec{SandboxId: id, Args: []string{"sleep", "1"}}}))
		_, errs["process list"] = procs.List(d.c, connect.NewRequest(&boxdv1.ListProcessesRequest{SandboxId: id}))
		_, errs["session create"] = procs.CreateSession(d.c, connect.NewRequest(&boxdv1.CreateSessionRequest{SandboxId: id, Name: "s"}))
		if st, err := sb.CopyOut(d.c, connect.NewRequest(&boxdv1.CopyOutRequest{SandboxId: id, Path: "/etc/hostname"})); err != nil {
			errs["copy out"] = err
		} else {
			for st.Receive() {
			}
			errs["copy out"] = st.Err()
			st.Close()
		}
		_, errs["stat path"] = sb.StatPath(d.c, connect.NewRequest(&boxdv1.StatPathRequest{SandboxId: id, Path: "/"}))
		return errs
	}
	for what, err := range try() {
		wantCodeAll(t, what+" on a pool member", err, connect.CodeNotFound, id)
	}
	for _, args := range [][]string{
		{"exec", id, "--", "true"},
		{"files", "cat", id, "/etc/passwd"},
		{"cp", id + ":/etc/hostname", t.TempDir()},
		{"session", "create", id, "s2"},
	} {
		out, errOut, code := d.boxctl(args...)
		if code == 0 || !strings.Contains(errOut, "not found") {
			t.Errorf("boxctl %v on a pool member: exit %d, stdout %q stderr %q; want not found", args, code, out, errOut)
		}
	}

	// Handed out, the same id works for everything.
	resp, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.Sandbox.Id != id {
		t.Fatalf("create got %s, not the pool member %s", resp.Msg.Sandbox.Id, id)
	}
	for what, err := range try() {
		if err != nil {
			t.Errorf("%s after adoption: %v", what, err)
		}
	}
	if out, errOut, code := d.boxctl("exec", id, "--", "echo", "hi"); code != 0 || out != "hi\n" {
		t.Errorf("boxctl exec after adoption: exit %d %q %q", code, out, errOut)
	}
}

// TestMaxSandboxes: with --max-sandboxes 2 and a pool of 1, the member
// counts; a client's create at the limit takes the member's slot; the next
// is refused resource_exhausted naming the limit; creates racing for the
// last slots never overshoot.
func TestMaxSandboxes(t *testing.T) {
	d := startBoxd(t, namespace+"-max", true, "--max-sandboxes", "2", "--warm-pool", "1")
	member := waitPool(t, d.c, 1, d.dir)[0]
	cold := func() (string, error) { // cold keeps the pool out of it
		resp, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Cold: true}))
		if err != nil {
			return "", err
		}
		return resp.Msg.Sandbox.Id, nil
	}
	a, err := cold()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cold() // at the limit with the member: the member makes room
	if err != nil {
		t.Fatalf("second create with an idle member holding the last slot: %v", err)
	}
	if _, err := d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: member, Args: []string{"true"}})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("the evicted member still answers: %v", err)
	}
	_, err = cold()
	wantCodeAll(t, "third create", err, connect.CodeResourceExhausted, "max-sandboxes", "2")
	_, errOut, code := d.boxctl("create")
	if code == 0 || !strings.Contains(errOut, "max-sandboxes") {
		t.Errorf("boxctl create at the limit: exit %d, stderr %q", code, errOut)
	}
	if n := countContainers(t, d); n != 2 {
		t.Errorf("%d containers exist, want 2", n)
	}
	// A restarted boxd counts what exists again.
	d.kill()
	d.start(t)
	_, err = cold()
	wantCodeAll(t, "create at the limit after a restart", err, connect.CodeResourceExhausted, "max-sandboxes")

	// Deleting frees the slots; 5 racing creates get exactly 2.
	for _, id := range []string{a, b} {
		if _, err := d.api.DeleteSandbox(d.c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id})); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	made, refused := 0, 0
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := cold()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made++
			case connect.CodeOf(err) == connect.CodeResourceExhausted:
				refused++
			default:
				t.Errorf("racing create: %v", err)
			}
		}()
	}
	wg.Wait()
	if made != 2 || refused != 3 {
		t.Errorf("5 racing creates under max-sandboxes 2 (pool refilled meanwhile or not): %d made, %d refused", made, refused)
	}
	if n := countContainers(t, d); n > 2 {
		t.Errorf("%d containers exist, over max-sandboxes 2", n)
	}

	// Sandboxes removed behind boxd's back (ctr rm) stop counting at the
	// next reconcile pass instead of holding their slots until a restart.
	destroyAll(t, d.c)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := cold()
		if err == nil {
			break
		}
		if connect.CodeOf(err) != connect.CodeResourceExhausted || time.Now().After(deadline) {
			t.Fatalf("create after the sandboxes were removed from containerd: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func countContainers(t *testing.T, d *daemon) int {
	t.Helper()
	ctrs, err := env.ctr.Containers(d.c)
	if err != nil {
		t.Fatal(err)
	}
	return len(ctrs)
}

func cgroupFile(controller, rel, file string) string {
	if cgroups.Mode() == cgroups.Unified {
		return filepath.Join("/sys/fs/cgroup", rel, file)
	}
	return filepath.Join("/sys/fs/cgroup", controller, rel, file)
}

func readCgroupInt(t *testing.T, p string) int64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return v
}

// TestCgroupTotals: the parent cgroup of all sandboxes carries the memory
// and pids totals, the sandboxes sit under it, the kernel holds their sum
// to the pids total, and a create with the total used up, or asking more
// than a total, is refused resource_exhausted naming it.
func TestCgroupTotals(t *testing.T) {
	ns := namespace + "-totals"
	d := startBoxd(t, ns, true, "--max-pids-total", "100", "--default-pids", "60", "--max-memory-total", "1g", "--default-memory", "64m")
	parent := "/" + ns
	if v := readCgroupInt(t, cgroupFile("pids", parent, "pids.max")); v != 100 {
		t.Errorf("parent pids.max = %d, want 100", v)
	}
	memFile := "memory.limit_in_bytes"
	if cgroups.Mode() == cgroups.Unified {
		memFile = "memory.max"
	}
	if v := readCgroupInt(t, cgroupFile("memory", parent, memFile)); v != 1<<30 {
		t.Errorf("parent %s = %d, want 1 GiB", memFile, v)
	}

	_, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Pids: 200}}))
	wantCodeAll(t, "create with pids above the total", err, connect.CodeResourceExhausted, "max-pids-total", "100")
	_, err = d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Limits: &boxdv1.Limits{Memory: "2g"}}))
	wantCodeAll(t, "create with memory above the total", err, connect.CodeResourceExhausted, "max-memory-total")

	// Two sandboxes of 60 pids each try to use all of theirs: the total
	// of 100 stops the second.
	fill := func(id string) {
		_, err := rpcclient.NewProcess(d.sock).Start(d.c, connect.NewRequest(&boxdv1.StartProcessRequest{Spec: &boxdv1.ProcessSpec{
			SandboxId: id, Args: []string{"sh", "-c", "for i in $(seq 80); do sleep 600 & done 2>/dev/null; wait"}}}))
		if err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for range 2 {
		resp, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Msg.Sandbox.Id
		ids = append(ids, id)
		if _, err := os.Stat(cgroupFile("pids", parent+"/"+id, "pids.max")); err != nil {
			t.Errorf("sandbox %s is not under the parent cgroup: %v", id, err)
		}
		fill(id)
	}
	var used int64
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if used = readCgroupInt(t, cgroupFile("pids", parent, "pids.current")); used >= 95 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	a := readCgroupInt(t, cgroupFile("pids", parent+"/"+ids[0], "pids.current"))
	b := readCgroupInt(t, cgroupFile("pids", parent+"/"+ids[1], "pids.current"))
	t.Logf("pids in use: parent %d, sandboxes %d + %d", used, a, b)
	if used > 100 || a+b > 100 {
		t.Errorf("sandboxes hold %d+%d pids, parent %d: over the total of 100", a, b, used)
	}
	if used < 90 {
		t.Fatalf("the sandboxes filled only %d of 100 pids", used)
	}
	_, err = d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	wantCodeAll(t, "create with the pids total used up", err, connect.CodeResourceExhausted, "max-pids-total", "100")
	if n := countContainers(t, d); n != 2 {
		t.Errorf("%d containers after the refused create, want 2 (nothing half-made)", n)
	}
	// Deleting one gives the pids back.
	if _, err := d.api.DeleteSandbox(d.c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: ids[0]})); err != nil {
		t.Fatal(err)
	}
	if _, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{})); err != nil {
		t.Errorf("create after freeing pids: %v", err)
	}
}

// TestConnectionCap: with --max-connections 4, four idle raw connections
// fill the cap; a fifth is answered resource_exhausted naming the limit,
// whether it speaks Connect over HTTP/2 (boxctl, the Go client) or HTTP/1
// (curl); the daemon serves again once they close.
func TestConnectionCap(t *testing.T) {
	d := startBoxd(t, namespace+"-conns", false, "--max-connections", "4", "--conn-idle-timeout", "1m")
	var held []net.Conn
	for range 4 {
		c, err := net.Dial("unix", d.sock)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	time.Sleep(200 * time.Millisecond) // accepted
	_, err := rpcclient.New(d.sock).ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	wantCodeAll(t, "5th connection (HTTP/2)", err, connect.CodeResourceExhausted, "max-connections", "4")

	c, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /boxd.v1.SandboxService/ListSandboxes HTTP/1.1\r\nHost: boxd\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("5th connection (HTTP/1): %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "resource_exhausted") || !strings.Contains(string(body), "max-connections") {
		t.Errorf("5th connection (HTTP/1): %s %s", resp.Status, body)
	}
	_, errOut, code := d.boxctl("ls")
	if code == 0 || !strings.Contains(errOut, "max-connections") {
		t.Errorf("boxctl ls over the cap: exit %d, stderr %q", code, errOut)
	}

	for _, c := range held {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := rpcclient.New(d.sock).ListSandboxes(d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon does not answer after the connections closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, errOut, code := d.boxctl("ls"); code != 0 {
		t.Errorf("boxctl ls after the connections closed: exit %d %s", code, errOut)
	}
}

// TestConnIdleTimeout: connections with no call in progress are closed
// after --conn-idle-timeout (silent ones, and HTTP/1 keep-alive ones after
// a call), and a call in progress is not cut however long it stays quiet.
func TestConnIdleTimeout(t *testing.T) {
	d := startBoxd(t, namespace+"-idle", true, "--conn-idle-timeout", "2s")
	closedAfter := func(c net.Conn) time.Duration {
		t0 := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		_, err := io.Copy(io.Discard, c)
		if err != nil {
			t.Errorf("connection not closed by boxd: %v", err)
		}
		return time.Since(t0)
	}
	silent, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	if el := closedAfter(silent); el < 1500*time.Millisecond || el > 5*time.Second {
		t.Errorf("silent connection closed after %v, want about 2s", el)
	}
	silent.Close()

	ka, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(ka, "POST /boxd.v1.SandboxService/ListSandboxes HTTP/1.1\r\nHost: boxd\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
	br := bufio.NewReader(ka)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("keep-alive call: %v %v", err, resp)
	}
	io.Copy(io.Discard, resp.Body)
	t0 := time.Now()
	_ = ka.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("keep-alive connection after its call: %v, want closed", err)
	}
	if el := time.Since(t0); el < 1500*time.Millisecond || el > 5*time.Second {
		t.Errorf("keep-alive connection closed after %v, want about 2s", el)
	}
	ka.Close()

	// Quiet calls longer than the idle timeout: unary and streaming.
	resp2, err := d.api.CreateSandbox(d.c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp2.Msg.Sandbox.Id
	ex, err := d.api.Exec(d.c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "sleep 4; echo done"}}))
	if err != nil || string(ex.Msg.Stdout) != "done\n" {
		t.Errorf("unary exec quiet for 4s with a 2s idle timeout: %v %q", err, ex.Msg.GetStdout())
	}
	if out, errOut, code := d.boxctl("exec", id, "--", "sh", "-c", "sleep 4; echo done"); code != 0 || out != "done\n" {
		t.Errorf("streaming exec quiet for 4s with a 2s idle timeout: exit %d %q %q", code, out, errOut)
	}
}
