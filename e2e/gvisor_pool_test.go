//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestGvisorPool: a warm pool of gVisor members (--warm-pool IMAGE=N@gvisor)
// serves gVisor creates that fit it and nothing else: the sandbox it hands
// out is what a cold gVisor create of the same request gives (inspect but
// for ids and times, environment, working directory, limits from the
// host and from inside gVisor); a runc create and a gVisor create with
// other limits are made cold; a sandbox handed out and deleted never
// comes back; a boxd SIGKILLed and restarted takes its gVisor member back
// and hands it out.
func TestGvisorPool(t *testing.T) {
	const ns = namespace + "-gvpool"
	sock, dir, restart, c := poolDaemon(t, ns, "--warm-pool", testImage+"=1@gvisor", "--warm-pool", testImage+"=0")
	api := rpcclient.New(sock)
	members := waitPool(t, c, 1, dir)
	if _, err := os.Stat(filepath.Join(dir, "state", "sandboxes", members[0], "g")); err != nil {
		t.Fatalf("member %s has no gVisor agent directory: %v", members[0], err)
	}
	// The member's init answers a moment before boxd files it as ready.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pools, err := rpcclient.NewPool(sock).ListPools(c, connect.NewRequest(&boxdv1.ListPoolsRequest{}))
		if err == nil && len(pools.Msg.Pools) == 1 && pools.Msg.Pools[0].Runtime == "gvisor" && pools.Msg.Pools[0].Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pools: %v %v, want one gvisor pool with its member ready", pools, err)
		}
	}

	// A runc create is never served by a gVisor member.
	rc, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Runtime: "runc"}))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(members, rc.Msg.Sandbox.Id) || rc.Msg.Sandbox.Runtime != "runc" {
		t.Fatalf("a runc create got %s (runtime %s), the gVisor member %v", rc.Msg.Sandbox.Id, rc.Msg.Sandbox.Runtime, members)
	}

	req := func(name string, cold bool) *boxdv1.CreateSandboxRequest {
		return &boxdv1.CreateSandboxRequest{
			Runtime: "gvisor", Env: []string{"A=1", "PATH=/bin:/usr/bin", "HOSTNAME=mine"},
			Workdir: "/srv/app", Labels: map[string]string{"team": "x"}, Name: name, Ttl: "7m",
			ExecTimeout: "30s", OutputLimit: 4096, IdleTimeout: "10m", OnIdle: "delete", Cold: cold,
		}
	}
	got := createPooledAndCold(t, c, api, members, req)
	if got[0].Runtime != "gvisor" || got[0].RuntimeVersion == "" {
		t.Errorf("pooled sandbox runtime %q %q, want gvisor and its version", got[0].Runtime, got[0].RuntimeVersion)
	}
	var seen []string
	for _, sb := range got {
		mem, pids, quota := cgroupLimitsNS(t, ns, sb.Id)
		ex, err := api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: sb.Id, Args: []string{"sh", "-c",
			"pwd; env | grep -v ^HOSTNAME= | sort; echo host=$HOSTNAME; grep MemTotal /proc/meminfo; uname -r"}}))
		if err != nil {
			t.Fatal(err)
		}
		out := strings.ReplaceAll(string(ex.Msg.Stdout), sb.Id, "ID")
		seen = append(seen, fmt.Sprintf("mem %d pids %d quota %d\n%s", mem, pids, quota, out))
	}
	if seen[0] != seen[1] {
		t.Errorf("inside the sandboxes:\npool %s\ncold %s", seen[0], seen[1])
	}
	if !strings.Contains(seen[0], "/srv/app\n") || !strings.Contains(seen[0], "A=1\n") || !strings.Contains(seen[0], "host=ID\n") {
		t.Errorf("pooled sandbox from inside: %s", seen[0])
	}

	// Limits other than the member's make a gVisor create cold: the
	// Sentry sized itself to the member's at boot.
	refilled := waitPool(t, c, 1, dir)
	if slices.Contains(refilled, got[0].Id) {
		t.Fatalf("the pool holds %s again after handing it out", got[0].Id)
	}
	big, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Runtime: "gvisor", Limits: &boxdv1.Limits{Memory: "96m"}}))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(refilled, big.Msg.Sandbox.Id) {
		t.Errorf("a gVisor create with its own memory limit took the member %s", big.Msg.Sandbox.Id)
	}
	ex, err := api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: big.Msg.Sandbox.Id, Args: []string{"grep", "MemTotal", "/proc/meminfo"}}))
	if err != nil || !strings.Contains(string(ex.Msg.Stdout), fmt.Sprint(96<<10)) {
		t.Errorf("MemTotal in the cold 96m gVisor sandbox: %v %q", err, ex.Msg.GetStdout())
	}

	// Handed out and deleted: gone for good.
	if _, err := api.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: "pooled"})); err != nil {
		t.Fatal(err)
	}

	// SIGKILL and restart: the member is taken back, handed out, answers.
	before := waitPool(t, c, 1, dir)
	restart()
	time.Sleep(2 * time.Second)
	after := waitPool(t, c, 1, dir)
	if !slices.Equal(before, after) {
		t.Fatalf("members before the restart %v, after %v: want the same one taken back", before, after)
	}
	back, err := api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Runtime: "gvisor", Name: "taken-back", Env: []string{"B=2"}}))
	if err != nil {
		t.Fatal(err)
	}
	if back.Msg.Sandbox.Id != after[0] || back.Msg.Sandbox.Runtime != "gvisor" {
		t.Fatalf("create after the restart got %s (%s), want the member taken back %s", back.Msg.Sandbox.Id, back.Msg.Sandbox.Runtime, after[0])
	}
	ex, err = api.Exec(c, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: "taken-back", Args: []string{"sh", "-c", "echo $B; uname -r"}}))
	if err != nil || !strings.HasPrefix(string(ex.Msg.Stdout), "2\n") || !strings.Contains(string(ex.Msg.Stdout), "gvisor") {
		t.Errorf("exec in the gVisor member adopted after the restart: %v %q", err, ex.Msg.GetStdout())
	}
	if g, err := api.GetSandbox(c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: "taken-back"})); err != nil || g.Msg.Sandbox.InitPid != back.Msg.Sandbox.InitPid || g.Msg.Sandbox.State != "running" {
		t.Errorf("inspect of the member adopted after the restart: %v %v", g, err)
	}
	list, err := api.ListSandboxes(c, connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sb := range list.Msg.Sandboxes {
		ids = append(ids, sb.Id)
	}
	slices.Sort(ids)
	want := []string{rc.Msg.Sandbox.Id, got[1].Id, big.Msg.Sandbox.Id, back.Msg.Sandbox.Id}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("list shows %v, want the four client sandboxes %v (members stay hidden, the deleted one gone)", ids, want)
	}
}
