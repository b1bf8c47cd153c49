//go:build linux

package e2e

import (
	"encoding/json"
	"github.com/boxd-dev/boxd/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestImageReplaceNeedsForce is what another user of the socket would
// try: replace or remove an image a running sandbox uses.
// Every path that writes an image name is refused without force, naming
// the image and the sandboxes; a forced replace is atomic, audited in the
// image's labels, and leaves the running sandbox's files alone.
func TestImageReplaceNeedsForce(t *testing.T) {
	const name = "replace/x:1"
	oldRoot, newRoot := rootfsWithMarker(t, "old"), rootfsWithMarker(t, "new")
	if _, err := boxctl(nil, "image", "import", "--rootfs", oldRoot, "--name", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _, _ = boxctlRun("image", "rm", "--force", name) })
	first := imageNamed(t, name)
	if !callerRe.MatchString(first.Labels["boxd.io/imported-by"]) {
		t.Errorf("imported-by = %q, want uid=0 pid=N", first.Labels["boxd.io/imported-by"])
	}
	if at, err := time.Parse(time.RFC3339, first.Labels["boxd.io/imported-at"]); err != nil || time.Since(at) > time.Minute {
		t.Errorf("imported-at = %q (%v)", first.Labels["boxd.io/imported-at"], err)
	}

	sb := createOn(t, name)
	wantMarker(t, sb, "old")

	// A plain import of other content under the name: refused, naming the
	// image and the sandbox using it.
	_, stderr, code := boxctlRun("image", "import", "--rootfs", newRoot, "--name", name)
	if code == 0 || !strings.Contains(stderr, "already_exists") || !strings.Contains(stderr, name) || !strings.Contains(stderr, sb) {
		t.Errorf("plain rootfs import over %s: exit %d, %q; want already_exists naming it and %s", name, code, stderr, sb)
	}
	t.Logf("plain import: exit %d: %s", code, stderr)
	// The archive path too: with --name, and with the name the archive
	// itself carries (ctr writes io.containerd.image.name).
	archive := exportImage(t, testImage)
	if _, stderr, code := boxctlRun("image", "import", archive, "--name", name); code == 0 || !strings.Contains(stderr, "already_exists") || !strings.Contains(stderr, name) {
		t.Errorf("plain archive import --name %s: exit %d, %q", name, code, stderr)
	}
	if _, stderr, code := boxctlRun("image", "import", archive); code == 0 || !strings.Contains(stderr, "already_exists") || !strings.Contains(stderr, testImage) {
		t.Errorf("plain archive import carrying the name %s: exit %d, %q", testImage, code, stderr)
	}
	if got := imageNamed(t, name); got.Digest != first.Digest {
		t.Fatalf("a refused import changed %s: %s -> %s", name, first.Digest, got.Digest)
	}
	sb2 := createOn(t, name)
	wantMarker(t, sb2, "old")

	// Removal while sandboxes use it: refused through boxctl and the API.
	_, stderr, code = boxctlRun("image", "rm", name)
	if code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, name) ||
		!strings.Contains(stderr, sb) || !strings.Contains(stderr, sb2) {
		t.Errorf("image rm of a used image: exit %d, %q", code, stderr)
	}
	t.Logf("plain rm: exit %d: %s", code, stderr)
	_, err := env.api.RemoveImage(ctx(t), connect.NewRequest(&boxdv1.RemoveImageRequest{Name: name}))
	wantCode(t, "RemoveImage of a used image", err, connect.CodeFailedPrecondition, sb)

	// A forced import that fails leaves the old image as it was.
	junk := filepath.Join(t.TempDir(), "junk.tar")
	must(t, os.WriteFile(junk, []byte(strings.Repeat("not a tar ", 1000)), 0o644))
	if _, stderr, code := boxctlRun("image", "import", "--force", junk, "--name", name); code == 0 || !strings.Contains(stderr, "invalid_argument") {
		t.Errorf("forced import of garbage: exit %d, %q", code, stderr)
	}
	if got := imageNamed(t, name); got.Digest != first.Digest {
		t.Fatalf("a failed forced import changed %s: %s -> %s", name, first.Digest, got.Digest)
	}

	// The forced replace works and says who did it.
	if _, err := boxctl(nil, "image", "import", "--rootfs", newRoot, "--name", name, "--force"); err != nil {
		t.Fatal(err)
	}
	listed := imageFromLsJSON(t, name)
	l := listed.Labels
	if listed.Digest == first.Digest || !callerRe.MatchString(l["boxd.io/replaced-by"]) || l["boxd.io/replaced-digest"] != first.Digest ||
		!strings.Contains(l["boxd.io/replaced-in-use"], sb) || !strings.Contains(l["boxd.io/replaced-in-use"], sb2) ||
		l["boxd.io/imported-by"] != first.Labels["boxd.io/imported-by"] || l["boxd.io/replaced-at"] == "" {
		t.Errorf("image ls --json after a forced replace: %+v", listed)
	}
	t.Logf("labels after the forced replace: %v", l)
	// The running sandboxes keep the files they started with; a new one
	// gets the new image.
	wantMarker(t, sb, "old")
	wantMarker(t, sb2, "old")
	sb3 := createOn(t, name)
	wantMarker(t, sb3, "new")

	// Once nothing uses it, a plain rm works.
	for _, id := range []string{sb, sb2, sb3} {
		if _, err := boxctl(nil, "rm", "-f", id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := boxctl(nil, "image", "rm", name); err != nil {
		t.Fatalf("plain rm of an unused image: %v", err)
	}
	if ls, _ := boxctl(nil, "image", "ls"); strings.Contains(ls, name) {
		t.Errorf("%s still listed after rm: %q", name, ls)
	}
}

// TestImageForcedRemoveKeepsSandbox removes an image from under a running
// sandbox with --force: the sandbox keeps running on its own snapshot.
func TestImageForcedRemoveKeepsSandbox(t *testing.T) {
	const name = "replace/gone:1"
	if _, err := boxctl(nil, "image", "import", "--rootfs", rootfsWithMarker(t, "gone"), "--name", name); err != nil {
		t.Fatal(err)
	}
	sb := createOn(t, name)
	if _, stderr, code := boxctlRun("image", "rm", name, "--force"); code != 0 {
		t.Fatalf("forced rm: exit %d, %q", code, stderr)
	}
	if _, err := env.api.RemoveImage(ctx(t), connect.NewRequest(&boxdv1.RemoveImageRequest{Name: name, Force: true})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("second forced rm: %v, want not_found", err)
	}
	wantMarker(t, sb, "gone")
	sh(t, sb, "echo more > /workspace/f && cat /workspace/f")
	if _, stderr, code := boxctlRun("create", "--image", name); code == 0 || !strings.Contains(stderr, "not_found") {
		t.Errorf("create from the removed image: exit %d, %q", code, stderr)
	}
}

var callerRe = regexp.MustCompile(`^uid=0 pid=[1-9][0-9]*$`)

// rootfsWithMarker is a copy of the busybox rootfs with /marker holding s.
func rootfsWithMarker(t *testing.T, s string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("cp", "-a", env.busybox, dir).CombinedOutput(); err != nil {
		t.Fatalf("copy rootfs: %v %s", err, out)
	}
	must(t, os.WriteFile(filepath.Join(dir, "marker"), []byte(s+"\n"), 0o644))
	return dir
}

// createOn creates a sandbox from image; the cleanup tolerates the test
// having removed it already.
func createOn(t *testing.T, image string) string {
	t.Helper()
	out, err := boxctl(nil, "create", "--image", image)
	if err != nil {
		t.Fatalf("create from %s: %v", image, err)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { _, _, _ = boxctlRun("rm", "-f", id) })
	return id
}

func wantMarker(t *testing.T, id, want string) {
	t.Helper()
	if got := strings.TrimSpace(sh(t, id, "cat /marker")); got != want {
		t.Errorf("sandbox %s sees /marker %q, want %q", id, got, want)
	}
}

// exportImage writes image as an OCI archive with ctr, which names it in
// the io.containerd.image.name annotation.
func exportImage(t *testing.T, image string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.tar")
	out, err := exec.Command(env.ctrd.Ctr, "--address", env.ctrd.Address, "-n", namespace,
		"images", "export", "--local", p, image).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr export: %v %s", err, out)
	}
	return p
}

// imageNamed is the API's view of one image.
func imageNamed(t *testing.T, name string) *boxdv1.Image {
	t.Helper()
	resp, err := env.api.ListImages(ctx(t), connect.NewRequest(&boxdv1.ListImagesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range resp.Msg.Images {
		if im.Name == name {
			return im
		}
	}
	t.Fatalf("image %s not listed", name)
	return nil
}

// imageFromLsJSON is boxctl image ls --json's view of one image.
func imageFromLsJSON(t *testing.T, name string) imageJSON {
	t.Helper()
	out, err := boxctl(nil, "image", "ls", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ims []imageJSON
	if err := json.Unmarshal([]byte(out), &ims); err != nil {
		t.Fatalf("image ls --json: %v\n%s", err, out)
	}
	for _, im := range ims {
		if im.Name == name {
			return im
		}
	}
	t.Fatalf("image ls --json does not list %s:\n%s", name, out)
	return imageJSON{}
}

type imageJSON struct {
	Name   string            `json:"name"`
	Digest string            `json:"digest"`
	Labels map[string]string `json:"labels"`
}

// TestImageReplaceSkipsStalePool: warm-pool members do not block the
// removal of their image (they are boxd's own and never ran code): rm
// destroys them. After a replace, an idle member, which holds the old
// files, is not handed out as the new image.
func TestImageReplaceSkipsStalePool(t *testing.T) {
	const ns = namespace + "-poolimg"
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o711)
	sock := filepath.Join(dir, "run", "boxd.sock")
	daemon := exec.Command(env.boxd, "--socket", sock, "--containerd", env.ctrd.Address, "--namespace", ns,
		"--state-dir", filepath.Join(dir, "state"), "--init-binary", env.initBin, "--runc", testenv.Runc,
		"--default-image", testImage, "--warm-pool", "1")
	logf, err := os.Create(filepath.Join(dir, "boxd.log"))
	must(t, err)
	daemon.Stdout, daemon.Stderr = logf, logf
	must(t, daemon.Start())
	logf.Close()
	c := namespaces.WithNamespace(ctx(t), ns)
	t.Cleanup(func() {
		_ = daemon.Process.Kill()
		_, _ = daemon.Process.Wait()
		destroyAll(t, c)
	})
	run := func(args ...string) (string, string, int) { return boxctlAt(sock, args...) }
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, _, code := run("image", "ls"); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("boxd did not start:\n%s", tail(filepath.Join(dir, "boxd.log")))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, stderr, code := run("image", "import", "--rootfs", rootfsWithMarker(t, "old"), "--name", testImage); code != 0 {
		t.Fatalf("import: %d %s", code, stderr)
	}
	members := waitPool(t, c, 1, dir)

	if _, stderr, code := run("image", "rm", testImage); code != 0 {
		t.Fatalf("rm of the pool's image: exit %d, %q; want it removed and its member destroyed", code, stderr)
	}
	if _, err := env.ctr.LoadContainer(c, members[0]); !errdefs.IsNotFound(err) {
		t.Errorf("pool member %s of the removed image: %v, want it destroyed", members[0], err)
	}
	if _, stderr, code := run("image", "import", "--rootfs", rootfsWithMarker(t, "new"), "--name", testImage); code != 0 {
		t.Fatalf("import after rm: %d %s", code, stderr)
	}
	waitPool(t, c, 1, dir) // a member of "new", idle
	if _, stderr, code := run("image", "import", "--force", "--rootfs", rootfsWithMarker(t, "newer"), "--name", testImage); code != 0 {
		t.Fatalf("forced import: %d %s", code, stderr)
	}
	out, stderr, code := run("run", "--", "cat", "/marker")
	if code != 0 || out != "newer\n" {
		t.Errorf("a sandbox made after the forced replace sees %q (exit %d, %q), want the new image", out, code, stderr)
	}
}
