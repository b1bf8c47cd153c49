//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// TestNonAdminPull: a registry on loopback (Debian's docker-registry)
// serves another image under a name boxd's store has, and under a name it
// lacks. A user that is not an admin, with valid credentials for that
// registry, cannot make boxd fetch either: create --pull always is
// permission_denied naming pull and the store's digest stays; --pull
// missing of the absent name is permission_denied and adds nothing;
// --pull missing of the present name fetches nothing and creates. An
// admin's --pull always replaces the image as before.
func TestNonAdminPull(t *testing.T) {
	sockGroup, adminGroup, ua, ub, uc := hostUsers(t)
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	host := startRegistry(t, filepath.Join(dir, "registry"), ca)
	d := startBoxd(t, namespace+"-nonadmin-pull", true, "--socket-group", sockGroup, "--admin-group", adminGroup,
		"--registry-ca", ca.caFile, "--registry-timeout", registryTimeout.String())
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(d.dir, "boxctl")
	for _, name := range []string{"boxctl", "boxctl-full"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(env.boxctl), name)); err != nil || os.WriteFile(filepath.Join(d.dir, name), b, 0o755) != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
	}

	// The registry gets the "registry" image under shared and absent;
	// boxd keeps the "local" one under shared and has no absent.
	shared, absent := host+"/team/app:v1", host+"/team/new:v1"
	login := []string{"--username", registryUser, "--password-stdin"}
	if _, stderr, code := d.boxctl("image", "import", "--rootfs", rootfsWithMarker(t, "registry"), "--name", shared); code != 0 {
		t.Fatalf("import: %s", stderr)
	}
	for _, ref := range []string{shared, absent} {
		if _, stderr, code := boxctlEnv(d.sock, nil, registryPassword+"\n", append([]string{"image", "push", "--from", shared}, append(login, ref)...)...); code != 0 {
			t.Fatalf("push %s: %s", ref, stderr)
		}
	}
	remote := findImage(t, d, shared).Digest
	if _, stderr, code := d.boxctl("image", "import", "--force", "--rootfs", rootfsWithMarker(t, "local"), "--name", shared); code != 0 {
		t.Fatalf("import over it: %s", stderr)
	}
	local := findImage(t, d, shared).Digest
	if local == remote {
		t.Fatalf("the local and the registry's image have one digest %s", local)
	}

	c := d.c
	auth := &boxdv1.RegistryAuth{Username: registryUser, Password: registryPassword}
	apiB, apiC := apiAs(ub, d.sock), apiAs(uc, d.sock)
	storeDigest := func() string { t.Helper(); return findImage(t, d, shared).Digest }
	refused := func(what string, req *boxdv1.CreateSandboxRequest) {
		t.Helper()
		before := readStoreState(t, c)
		resp, err := apiB.sb.CreateSandbox(c, connect.NewRequest(req))
		if err == nil {
			t.Errorf("%s by a non-admin made %s; want permission_denied", what, resp.Msg.Sandbox.Id)
			_, _ = apiB.sb.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: resp.Msg.Sandbox.Id, Force: true}))
		} else if msg := err.(*connect.Error).Message(); connect.CodeOf(err) != connect.CodePermissionDenied || !strings.HasPrefix(msg, "pull: ") {
			t.Errorf("%s by a non-admin: %v; want permission_denied naming pull", what, err)
		}
		wantNothingLeft(t, what, c, before)
	}

	t.Run("always", func(t *testing.T) {
		refused("create --pull always of a shared name", &boxdv1.CreateSandboxRequest{Image: shared, Pull: "always", RegistryAuth: auth})
		if got := storeDigest(); got != local {
			t.Errorf("a non-admin's --pull always replaced %s: digest %s, was %s", shared, got, local)
		}
		// Through boxctl, as the user sees it.
		_, stderr, code, _ := boxctlAs(t, bin, ua, d.sock, "create", "--image", shared, "--pull", "always")
		if code == 0 || !strings.Contains(stderr, "permission_denied") || !strings.Contains(stderr, "pull: ") {
			t.Errorf("boxctl create --pull always as a non-admin: exit %d %s; want permission_denied naming pull", code, stderr)
		}
		// The default image too (a create naming none).
		refused("create --pull always of the default image", &boxdv1.CreateSandboxRequest{Pull: "always"})
		// The refusal is in the audit log, with the user's uid.
		log, err := os.ReadFile(filepath.Join(d.dir, "state", audit.FileName))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`"uid":%d,`, ub.uid)
		found := false
		for _, line := range strings.Split(string(log), "\n") {
			found = found || strings.Contains(line, want) && strings.Contains(line, "/CreateSandbox") && strings.Contains(line, "permission_denied: pull: ")
		}
		if !found {
			t.Errorf("no audit line of b's refused create (%s):\n%s", want, log)
		}
	})

	t.Run("missing absent", func(t *testing.T) {
		refused("create --pull missing of an absent name", &boxdv1.CreateSandboxRequest{Image: absent, Pull: "missing", RegistryAuth: auth})
		resp, err := rpcclient.New(d.sock).ListImages(c, connect.NewRequest(&boxdv1.ListImagesRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range resp.Msg.Images {
			if im.Name == absent {
				t.Errorf("a non-admin's --pull missing added %s (%s)", absent, im.Digest)
			}
		}
	})

	t.Run("missing present", func(t *testing.T) {
		resp, err := apiB.sb.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Image: shared, Pull: "missing", RegistryAuth: auth}))
		if err != nil {
			t.Fatalf("create --pull missing of a present image by a non-admin: %v", err)
		}
		id := resp.Msg.Sandbox.Id
		defer apiB.sb.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id, Force: true}))
		if out := markerOf(t, apiB, id); out != "local" {
			t.Errorf("the sandbox runs the %q image, want the local one", out)
		}
		if got := storeDigest(); got != local {
			t.Errorf("--pull missing of a present image changed %s: digest %s, was %s", shared, got, local)
		}
	})

	t.Run("PullImage", func(t *testing.T) {
		tr := apiwire.Transport(d.sock)
		tr.DialContext = testenv.DialAs(ub.uid, ub.gid, ub.groups, d.sock)
		reg := boxdv1connect.NewRegistryServiceClient(&http.Client{Transport: tr}, "http://boxd")
		_, _, err := pullAPI(c, reg, &boxdv1.PullImageRequest{Reference: shared, Auth: auth, Force: true})
		wantCodeAll(t, "a non-admin's PullImage", err, connect.CodePermissionDenied, "--admin-group")
	})

	t.Run("admin always", func(t *testing.T) {
		resp, err := apiC.sb.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{Image: shared, Pull: "always", RegistryAuth: auth}))
		if err != nil {
			t.Fatalf("an admin's create --pull always: %v", err)
		}
		id := resp.Msg.Sandbox.Id
		defer apiC.sb.DeleteSandbox(c, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id, Force: true}))
		if got := storeDigest(); got != remote {
			t.Errorf("an admin's --pull always left digest %s, want the registry's %s", got, remote)
		}
		if out := markerOf(t, apiC, id); out != "registry" {
			t.Errorf("the admin's sandbox runs the %q image, want the registry's", out)
		}
	})
}

// markerOf reads /marker in a sandbox (see rootfsWithMarker).
func markerOf(t *testing.T, api clientsAs, id string) string {
	t.Helper()
	resp, err := api.sb.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"cat", "/marker"}}))
	if err != nil {
		t.Fatalf("cat /marker: %v", err)
	}
	return strings.TrimSpace(string(resp.Msg.Stdout))
}
