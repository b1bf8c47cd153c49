//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// sandboxVolumes is what GetSandbox says a sandbox mounts, as
// "NAME:/PATH[:ro]" strings.
func sandboxVolumes(t *testing.T, id string) []string {
	t.Helper()
	resp, err := env.api.GetSandbox(ctx(t), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return volumeStrings(resp.Msg.Sandbox.Volumes)
}

func volumeStrings(vs []*boxdv1.VolumeMount) []string {
	var out []string
	for _, v := range vs {
		s := v.Volume + ":" + v.Path
		if v.ReadOnly {
			s += ":ro"
		}
		if v.VolumeId == "" {
			s += " (no id)"
		}
		out = append(out, s)
	}
	return out
}

// forkIDs runs boxctl fork and removes the forks at the end.
func forkIDs(t *testing.T, args ...string) []string {
	t.Helper()
	out, stderr, code := boxctlRun(append([]string{"fork"}, args...)...)
	if code != 0 {
		t.Fatalf("fork %v: %s", args, stderr)
	}
	ids := strings.Fields(out)
	t.Cleanup(func() {
		for _, id := range ids {
			boxctlRun("rm", "-f", id)
		}
	})
	return ids
}

// TestVolumeInspect: a sandbox's volumes (name, path, read-only) are in
// GetSandbox, ListSandboxes and boxctl inspect.
func TestVolumeInspect(t *testing.T) {
	tag := strconv.Itoa(os.Getpid())
	a := newVolume(t, "insp-a-"+tag)
	b := newVolume(t, "insp-b-"+tag)
	id := newSandbox(t, "--volume", a.Name+":/a", "--volume", b.Name+":/b:ro")
	want := a.Name + ":/a " + b.Name + ":/b:ro"
	if got := strings.Join(sandboxVolumes(t, id), " "); got != want {
		t.Errorf("GetSandbox volumes = %q, want %q", got, want)
	}
	list, err := env.api.ListSandboxes(ctx(t), connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list.Msg.Sandboxes {
		if sb.Id == id {
			if got := strings.Join(volumeStrings(sb.Volumes), " "); got != want {
				t.Errorf("ListSandboxes volumes = %q, want %q", got, want)
			}
		}
	}
	out, stderr, code := boxctlRun("inspect", id)
	if code != 0 {
		t.Fatalf("inspect: %s", stderr)
	}
	var js struct {
		Volumes []struct {
			Volume   string `json:"volume"`
			VolumeID string `json:"volume_id"`
			Path     string `json:"path"`
			ReadOnly bool   `json:"read_only"`
		} `json:"volumes"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("inspect output: %v\n%s", err, out)
	}
	if len(js.Volumes) != 2 || js.Volumes[0].Volume != a.Name || js.Volumes[0].VolumeID != a.Id || js.Volumes[0].ReadOnly ||
		js.Volumes[1].Path != "/b" || !js.Volumes[1].ReadOnly {
		t.Errorf("boxctl inspect volumes = %+v", js.Volumes)
	}
	if got := sandboxVolumes(t, newSandbox(t)); len(got) != 0 {
		t.Errorf("a sandbox without volumes lists %v", got)
	}
}

// TestVolumeFork: a fork mounts its source's volumes read-only by
// default; --share-volumes mounts them as the source does, only for
// volumes created --shared (others: failed_precondition naming the volume,
// no fork left); --clone-volumes gives each fork its own copy, named
// VOLUME-FORKID, which diverges from the source.
func TestVolumeFork(t *testing.T) {
	tag := strconv.Itoa(os.Getpid())
	a := newVolume(t, "fka-"+tag)
	s := newVolume(t, "fks-"+tag, "--shared")
	src := newSandbox(t, "--volume", a.Name+":/a", "--volume", s.Name+":/s")
	sh(t, src, "echo src > /a/f && echo src > /s/f && sync")

	// Default: read-only, the source's data.
	f := forkIDs(t, src)[0]
	if got := strings.Join(sandboxVolumes(t, f), " "); got != a.Name+":/a:ro "+s.Name+":/s:ro" {
		t.Errorf("default fork's volumes = %q", got)
	}
	if got := sh(t, f, "cat /a/f /s/f"); got != "src\nsrc\n" {
		t.Errorf("default fork reads %q", got)
	}
	if out, stderr, code := boxctlRun("exec", f, "--", "sh", "-c", "echo x > /a/g"); code == 0 || !strings.Contains(out+stderr, "Read-only file system") {
		t.Errorf("write to a default fork's volume: exit %d %q %q", code, out, stderr)
	}
	if n := len(volumeAt(t, env.socket, a.Name).Mounts); n != 2 {
		t.Errorf("volume %s has %d mounts, want the source's and the fork's", a.Name, n)
	}

	// Share: refused for a volume not created shared, and nothing is left.
	before := len(listIDs(t))
	_, err := env.api.ForkSandbox(ctx(t), connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: src, ShareVolumes: true}))
	wantCodeAll(t, "share a volume not created shared", err, connect.CodeFailedPrecondition, a.Name, "shared")
	if after := len(listIDs(t)); after != before {
		t.Errorf("a refused fork left %d sandboxes", after-before)
	}
	_, err = env.api.ForkSandbox(ctx(t), connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: src, ShareVolumes: true, CloneVolumes: true}))
	wantCode(t, "share and clone", err, connect.CodeInvalidArgument, "share_volumes")
	srcS := newSandbox(t, "--volume", s.Name+":/s")
	sf := forkIDs(t, "--share-volumes", srcS)[0]
	sh(t, sf, "echo fork > /s/g && sync")
	if got := sh(t, srcS, "cat /s/g"); got != "fork\n" {
		t.Errorf("source reads the shared fork's write as %q", got)
	}

	// Clone: each fork its own copy, named after the volume and the fork.
	clones := forkIDs(t, "--clone-volumes", "-n", "2", src)
	for i, c := range clones {
		want := a.Name + "-" + c + ":/a " + s.Name + "-" + c + ":/s"
		if got := strings.Join(sandboxVolumes(t, c), " "); got != want {
			t.Errorf("clone fork %d volumes = %q, want %q", i, got, want)
		}
		t.Cleanup(func() {
			boxctlRun("rm", "-f", c)
			boxctlRun("volume", "rm", "--force", a.Name+"-"+c)
			boxctlRun("volume", "rm", "--force", s.Name+"-"+c)
		})
		if v := volumeAt(t, env.socket, a.Name+"-"+c); v.Labels["boxd.fork"] != c || v.Labels["boxd.fork-source"] != a.Name {
			t.Errorf("clone %s labels %v", v.Name, v.Labels)
		}
		sh(t, c, "cat /a/f >/dev/null && echo "+strconv.Itoa(i)+" > /a/f && sync")
	}
	if got := sh(t, src, "cat /a/f"); got != "src\n" {
		t.Errorf("source after its clones wrote: %q", got)
	}
	if got := sh(t, clones[1], "cat /a/f"); got != "1\n" {
		t.Errorf("clone 1 reads %q", got)
	}
}

// listIDs are the ids of the sandboxes the shared daemon lists.
func listIDs(t *testing.T) []string {
	t.Helper()
	resp, err := env.api.ListSandboxes(ctx(t), connect.NewRequest(&boxdv1.ListSandboxesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sb := range resp.Msg.Sandboxes {
		ids = append(ids, sb.Id)
	}
	return ids
}
