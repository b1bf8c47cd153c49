//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

func inspect(t *testing.T, id string) *boxdv1.Sandbox {
	t.Helper()
	resp, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return resp.Msg.Sandbox
}

func TestCreateInspectListDelete(t *testing.T) {
	id := newSandbox(t, "--memory", "96m", "--cpus", "0.5", "--pids", "64", "--env", "GREETING=hello", "--env", "EMPTY=",
		"--workdir", "/work/dir", "--label", "team=graders", "--label", "run=42", "--name", "lifecycle-box", "--ttl", "10m")

	// inspect through boxctl prints JSON with every setting.
	out, err := boxctl(nil, "inspect", "lifecycle-box")
	if err != nil {
		t.Fatal(err)
	}
	var sb struct {
		ID          string            `json:"id"`
		Name        string            `json:"name"`
		Image       string            `json:"image"`
		State       string            `json:"state"`
		MemoryBytes string            `json:"memory_bytes"` // int64 is a string in proto JSON
		Cpus        float64           `json:"cpus"`
		Pids        string            `json:"pids"`
		Env         []string          `json:"env"`
		Workdir     string            `json:"workdir"`
		Labels      map[string]string `json:"labels"`
		CreatedAt   time.Time         `json:"created_at"`
		ExpiresAt   time.Time         `json:"expires_at"`
		Security    struct {
			Network bool   `json:"network"`
			UIDMap  string `json:"uid_map"`
		} `json:"security"`
	}
	if err := json.Unmarshal([]byte(out), &sb); err != nil {
		t.Fatalf("inspect output is not JSON: %v\n%s", err, out)
	}
	if sb.ID != id || sb.Name != "lifecycle-box" || sb.Image != testImage || sb.State != "running" {
		t.Errorf("inspect id/name/image/state = %q %q %q %q", sb.ID, sb.Name, sb.Image, sb.State)
	}
	if sb.MemoryBytes != "100663296" || sb.Cpus != 0.5 || sb.Pids != "64" {
		t.Errorf("limits = %s bytes, %v cpus, %s pids", sb.MemoryBytes, sb.Cpus, sb.Pids)
	}
	if sb.Workdir != "/work/dir" || sb.Labels["team"] != "graders" || sb.Labels["run"] != "42" || len(sb.Labels) != 2 {
		t.Errorf("workdir %q labels %v", sb.Workdir, sb.Labels)
	}
	if !contains(sb.Env, "GREETING=hello") || !contains(sb.Env, "EMPTY=") {
		t.Errorf("env %v lacks the requested variables", sb.Env)
	}
	if ttl := sb.ExpiresAt.Sub(sb.CreatedAt); ttl != 10*time.Minute {
		t.Errorf("expires_at - created_at = %v, want 10m", ttl)
	}
	if sb.Security.Network || !validUIDMap(sb.Security.UIDMap) {
		t.Errorf("security = %+v", sb.Security)
	}

	// The sandbox sees its env and starts in its workdir.
	if got := sh(t, id, `echo "$GREETING:$(pwd)"`); got != "hello:/work/dir\n" {
		t.Errorf("env/workdir inside = %q", got)
	}

	// ls shows it, filters by label, and --json is machine readable.
	out, err = boxctl(nil, "ls", "--json", "--label", "team=graders")
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0]["id"] != id {
		t.Errorf("ls --json --label team=graders = %s (%v)", out, err)
	}
	out, err = boxctl(nil, "ls", "--json", "--label", "team=nobody")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("ls with a label nobody has = %q, %v", out, err)
	}
	out, err = boxctl(nil, "ls")
	if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "lifecycle-box") || !strings.Contains(out, "96m") {
		t.Errorf("ls table = %q, %v", out, err)
	}

	// inspect through the API carries live usage from the cgroup.
	if u := inspect(t, id).Usage; u == nil || u.Pids < 1 || u.MemoryBytes == 0 || u.MemoryBytes > 96<<20 {
		t.Errorf("usage = %+v", u)
	}

	// A second sandbox with the same name is refused.
	_, stderr, code := boxctlRun("create", "--name", "lifecycle-box")
	if code == 0 || !strings.Contains(stderr, "already_exists") {
		t.Errorf("duplicate name: exit %d, stderr %q", code, stderr)
	}

	// rm deletes container, snapshot and state dir.
	if _, err := boxctl(nil, "rm", id); err != nil {
		t.Fatal(err)
	}
	assertGone(t, id)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// assertGone checks that nothing of a sandbox is left: container, task,
// snapshot, state directory, mounts.
func assertGone(t *testing.T, id string) {
	t.Helper()
	c := namespaces.WithNamespace(ctx(t), namespace)
	if _, err := env.ctr.LoadContainer(c, id); err == nil {
		t.Errorf("container %s still exists", id)
	}
	sn := env.ctr.SnapshotService("overlayfs")
	if _, err := sn.Stat(c, id); err == nil {
		t.Errorf("snapshot %s still exists", id)
	}
	if _, err := os.Stat(filepath.Join(env.stateDir, "sandboxes", id)); !os.IsNotExist(err) {
		t.Errorf("state dir of %s still exists (%v)", id, err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), id) {
		t.Errorf("a mount naming %s is left", id)
	}
	_, stderr, code := boxctlRun("inspect", id)
	if code == 0 || !strings.Contains(stderr, "not_found") {
		t.Errorf("inspect after rm: exit %d, stderr %q", code, stderr)
	}
}

func TestTTLExpiry(t *testing.T) {
	out, err := boxctl(nil, "create", "--ttl", "1s")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	if !expired(id, 15*time.Second) {
		boxctlRun("rm", "-f", id)
		t.Fatalf("sandbox %s with ttl 1s still exists after 15s", id)
	}
	assertGone(t, id)
}

// expired waits up to d for a sandbox that expires in the background to be
// gone: inspect says not_found, and its state directory, which a destroy
// removes last (a failed delete must not leave a sandbox without its
// channel), is gone too.
func expired(id string, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, _, code := boxctlRun("inspect", id)
		if _, err := os.Stat(filepath.Join(env.stateDir, "sandboxes", id)); code != 0 && os.IsNotExist(err) {
			return true
		}
	}
	return false
}

func TestRunIsOneShot(t *testing.T) {
	before := countSandboxes(t)
	stdout, stderr, code := boxctlRun("run", "--memory", "64m", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if code != 7 || stdout != "out\n" || stderr != "err\n" {
		t.Errorf("run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if after := countSandboxes(t); after != before {
		t.Errorf("run left %d sandboxes behind", after-before)
	}
}

func countSandboxes(t *testing.T) int {
	t.Helper()
	resp, err := env.api.ListSandboxes(ctx(t), connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Msg.Sandboxes)
}

// ListSandboxes reads every task's state in one call; each sandbox's state
// and init pid in the list are those inspect reports: running, paused and
// stopped alike.
func TestListStates(t *testing.T) {
	label := "list-states=" + strconv.FormatInt(time.Now().UnixNano(), 36)
	running := newSandbox(t, "--label", label)
	paused := newSandbox(t, "--label", label)
	stopped := newSandbox(t, "--label", label)
	if _, err := env.api.PauseSandbox(ctx(t), connect.NewRequest(&boxdv1.PauseSandboxRequest{Id: paused})); err != nil {
		t.Fatal(err)
	}
	if _, err := env.api.StopSandbox(ctx(t), connect.NewRequest(&boxdv1.StopSandboxRequest{SandboxId: stopped})); err != nil {
		t.Fatal(err)
	}
	k, v, _ := strings.Cut(label, "=")
	resp, err := env.api.ListSandboxes(ctx(t), connect.NewRequest(&boxdv1.ListSandboxesRequest{Labels: map[string]string{k: v}}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{running: "running", paused: "paused", stopped: "stopped"}
	if len(resp.Msg.Sandboxes) != 3 {
		t.Fatalf("listed %d sandboxes, want 3", len(resp.Msg.Sandboxes))
	}
	for _, sb := range resp.Msg.Sandboxes {
		in := inspect(t, sb.Id)
		if sb.State != want[sb.Id] || sb.State != in.State || sb.InitPid != in.InitPid {
			t.Errorf("%s listed %s (init pid %d), inspect says %s (%d); want %s", sb.Id, sb.State, sb.InitPid, in.State, in.InitPid, want[sb.Id])
		}
		if sb.State == "running" && sb.InitPid <= 0 {
			t.Errorf("running %s listed without its init pid", sb.Id)
		}
	}
	if _, err := env.api.UnpauseSandbox(ctx(t), connect.NewRequest(&boxdv1.UnpauseSandboxRequest{Id: paused})); err != nil {
		t.Fatal(err)
	}
}
