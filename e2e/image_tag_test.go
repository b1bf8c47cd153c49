//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// TestImageTag: boxctl image tag SRC DST gives SRC's image a second name,
// as docker tag does: the same digest, a sandbox made from DST sees SRC's
// files. DST existing is already_exists unless --force, SRC missing is
// not_found, a bad reference invalid_argument naming the field; nothing
// changes on a refusal.
func TestImageTag(t *testing.T) {
	const src, dst, other = "tag/src:1", "tag/dst", "tag/other:1"
	for name, marker := range map[string]string{src: "src", other: "other"} {
		if _, err := boxctl(nil, "image", "import", "--rootfs", rootfsWithMarker(t, marker), "--name", name); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range []string{src, dst, other} {
			_, _, _ = boxctlRun("image", "rm", "--force", name)
		}
	})
	// Flags after the arguments, as users write them.
	out, stderr, code := boxctlRun("image", "tag", src, dst)
	if code != 0 {
		t.Fatalf("image tag %s %s: exit %d, %s", src, dst, code, stderr)
	}
	srcImg, dstImg := imageNamed(t, src), imageNamed(t, dst+":latest")
	if dstImg.Digest != srcImg.Digest || !strings.Contains(out, dst+":latest "+srcImg.Digest) {
		t.Errorf("tag: %s is %s, %s is %s; boxctl printed %q", src, srcImg.Digest, dst, dstImg.Digest, out)
	}
	if !callerRe.MatchString(dstImg.Labels["boxd.io/imported-by"]) {
		t.Errorf("tag's audit label imported-by = %q", dstImg.Labels["boxd.io/imported-by"])
	}
	sb := createOn(t, dst)
	wantMarker(t, sb, "src")

	refused := func(what string, req *boxdv1.TagImageRequest, code connect.Code, words ...string) {
		t.Helper()
		_, err := env.api.TagImage(ctx(t), connect.NewRequest(req))
		wantCodeAll(t, what, err, code, words...)
		if got := imageNamed(t, dst+":latest"); got.Digest != srcImg.Digest {
			t.Errorf("%s changed %s: %s -> %s", what, dst, srcImg.Digest, got.Digest)
		}
	}
	refused("tag over an existing name", &boxdv1.TagImageRequest{Source: other, Target: dst}, connect.CodeAlreadyExists, "target", dst, "--force")
	refused("tag of a missing source", &boxdv1.TagImageRequest{Source: "tag/none:1", Target: dst, Force: true}, connect.CodeNotFound, "source", "tag/none:1")
	refused("tag to a bad reference", &boxdv1.TagImageRequest{Source: src, Target: "Bad Ref"}, connect.CodeInvalidArgument, "target", "Bad Ref")
	refused("tag from a bad reference", &boxdv1.TagImageRequest{Source: "a..b", Target: dst, Force: true}, connect.CodeInvalidArgument, "source", "a..b")
	refused("tag to an empty name", &boxdv1.TagImageRequest{Source: src}, connect.CodeInvalidArgument, "target")
	if _, stderr, code := boxctlRun("image", "tag", other, dst); code == 0 || !strings.Contains(stderr, "already_exists") {
		t.Errorf("boxctl image tag over an existing name: exit %d, %q", code, stderr)
	}

	// --force points DST at the other image; the sandbox made from the old
	// one keeps its files, a new one gets the other's.
	if _, stderr, code := boxctlRun("image", "tag", other, dst, "--force"); code != 0 {
		t.Fatalf("image tag --force: exit %d, %s", code, stderr)
	}
	if got, want := imageNamed(t, dst+":latest"), imageNamed(t, other); got.Digest != want.Digest || got.Labels["boxd.io/replaced-digest"] != srcImg.Digest {
		t.Errorf("after tag --force: %s is %s (labels %v), want %s", dst, got.Digest, got.Labels, want.Digest)
	}
	wantMarker(t, sb, "src")
	wantMarker(t, createOn(t, dst), "other")
	// The source is untouched by all of it.
	if got := imageNamed(t, src); got.Digest != srcImg.Digest {
		t.Errorf("%s changed: %s -> %s", src, srcImg.Digest, got.Digest)
	}
}

// TestImageTagNonAdmin: a user of the socket that is not an admin cannot
// tag (a name decides what everyone's sandboxes are made from): the API
// and boxctl say permission_denied naming the call, and no name appears.
func TestImageTagNonAdmin(t *testing.T) {
	sockGroup, adminGroup, _, ub, uc := hostUsers(t)
	d := startBoxd(t, namespace+"-tag-nonadmin", true, "--socket-group", sockGroup, "--admin-group", adminGroup)
	if err := os.Chmod(filepath.Dir(d.dir), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(d.dir, "boxctl")
	for _, name := range []string{"boxctl", "boxctl-full"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(env.boxctl), name)); err != nil || os.WriteFile(filepath.Join(d.dir, name), b, 0o755) != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
	}
	const target = "tag/by-b:1"
	_, err := apiAs(ub, d.sock).sb.TagImage(d.c, connect.NewRequest(&boxdv1.TagImageRequest{Source: testImage, Target: target}))
	wantCodeAll(t, "b's TagImage", err, connect.CodePermissionDenied, "TagImage", "admin-group")
	_, stderr, code, _ := boxctlAs(t, bin, ub, d.sock, "image", "tag", testImage, target, "--force")
	if code == 0 || !strings.Contains(stderr, "permission_denied") || !strings.Contains(stderr, "TagImage") {
		t.Errorf("boxctl image tag as a non-admin: exit %d, %q; want permission_denied naming TagImage", code, stderr)
	}
	if out, _, _ := d.boxctl("image", "ls"); strings.Contains(out, target) {
		t.Errorf("a refused tag made %s:\n%s", target, out)
	}
	// An admin (a member of --admin-group) may.
	if _, stderr, code, _ := boxctlAs(t, bin, uc, d.sock, "image", "tag", testImage, target); code != 0 {
		t.Errorf("boxctl image tag as an admin: exit %d, %q", code, stderr)
	}
}
