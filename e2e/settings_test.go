//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// importAgentImage imports the test image again as name with one more
// layer (a user "agent", uid 1100, with its home and work directory) and a
// config that sets USER agent and WORKDIR /home/agent/work, as a
// Dockerfile with those lines would.
func importAgentImage(t *testing.T, name string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.tar")
	if out, err := exec.Command(env.ctrd.Ctr, "--address", env.ctrd.Address, "-n", namespace,
		"images", "export", "--local", src, testImage).CombinedOutput(); err != nil {
		t.Fatalf("ctr export: %v %s", err, out)
	}
	files := readTar(t, src)
	blob := func(d digest.Digest) []byte {
		b, ok := files[path.Join("blobs", d.Algorithm().String(), d.Encoded())]
		if !ok {
			t.Fatalf("archive lacks blob %s", d)
		}
		return b
	}
	put := func(b []byte) ocispec.Descriptor {
		d := digest.FromBytes(b)
		files[path.Join("blobs", d.Algorithm().String(), d.Encoded())] = b
		return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
	}
	putJSON := func(v any) ocispec.Descriptor {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return put(b)
	}
	var index ocispec.Index
	mustJSON(t, files["index.json"], &index)
	var manifest ocispec.Manifest
	mustJSON(t, blob(index.Manifests[0].Digest), &manifest)
	var config ocispec.Image
	mustJSON(t, blob(manifest.Config.Digest), &config)

	// The layer: /etc/passwd and /etc/group with agent added, its home.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	add := func(h *tar.Header, body string) {
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	add(&tar.Header{Name: "etc/passwd", Mode: 0o644, Typeflag: tar.TypeReg},
		"root:x:0:0:root:/root:/bin/sh\nagent:x:1100:1100:agent:/home/agent:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
	add(&tar.Header{Name: "etc/group", Mode: 0o644, Typeflag: tar.TypeReg}, "root:x:0:\nagent:x:1100:\nnogroup:x:65534:\n")
	add(&tar.Header{Name: "home/", Mode: 0o755, Typeflag: tar.TypeDir}, "")
	add(&tar.Header{Name: "home/agent/", Mode: 0o755, Typeflag: tar.TypeDir, Uid: 1100, Gid: 1100}, "")
	add(&tar.Header{Name: "home/agent/work/", Mode: 0o755, Typeflag: tar.TypeDir, Uid: 1100, Gid: 1100}, "")
	must(t, tw.Close())
	ld := put(layer.Bytes())
	ld.MediaType = ocispec.MediaTypeImageLayer
	manifest.Layers = append(manifest.Layers, ld)
	config.RootFS.DiffIDs = append(config.RootFS.DiffIDs, ld.Digest)
	config.Config.User = "agent"
	config.Config.WorkingDir = "/home/agent/work"

	d := putJSON(config)
	manifest.Config.Digest, manifest.Config.Size = d.Digest, d.Size
	d = putJSON(manifest)
	index.Manifests[0].Digest, index.Manifests[0].Size = d.Digest, d.Size
	b, _ := json.Marshal(index)
	files["index.json"] = b
	delete(files, "manifest.json")
	dst := filepath.Join(dir, "agent.tar")
	writeTar(t, dst, files)
	if _, err := boxctl(nil, "image", "import", dst, "--name", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := boxctl(nil, "image", "rm", name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// An image whose config says USER agent and WORKDIR /home/agent/work runs
// commands, processes, sessions and file operations as agent there, as
// docker does; --user at create and at exec override it.
func TestImageUserAndWorkdir(t *testing.T) {
	img := "boxd/agent-user:1"
	importAgentImage(t, img)
	id := newSandbox(t, "--image", img)

	sb := inspect(t, id)
	if sb.User != "agent" || sb.Workdir != "/home/agent/work" {
		t.Fatalf("inspect: user %q workdir %q, want agent and /home/agent/work", sb.User, sb.Workdir)
	}
	// boxctl exec (the process service) and the unary Exec alike.
	if got := sh(t, id, `echo $(id -u):$(id -g) $(pwd) $HOME`); got != "1100:1100 /home/agent/work /home/agent\n" {
		t.Errorf("boxctl exec: %q, want agent in its work directory", got)
	}
	resp, err := env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"sh", "-c", "id -u; pwd; touch f; stat -c %u f"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Msg.Stdout); got != "1100\n/home/agent/work\n1100\n" {
		t.Errorf("Exec: %q, want uid 1100 in /home/agent/work creating files as 1100", got)
	}
	// The user cannot write where root owns the directory.
	if _, _, code := boxctlRun("exec", id, "--", "touch", "/etc/x"); code == 0 {
		t.Error("agent could write /etc")
	}
	// An exec may still ask for root.
	resp, err = env.api.Exec(ctx(t), connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"id", "-u"}, User: "root"}))
	if err != nil || string(resp.Msg.Stdout) != "0\n" {
		t.Errorf("Exec as root: %v %q", err, resp.Msg.GetStdout())
	}
	// Files and sessions default to agent too.
	if _, err := boxctl([]byte("hi"), "files", "write", id, "/home/agent/work/w.txt"); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, id, "stat -c %u w.txt"); got != "1100\n" {
		t.Errorf("file written through the files API is owned by %q, want 1100", got)
	}
	if _, err := boxctl(nil, "session", "create", id, "s1"); err != nil {
		t.Fatal(err)
	}
	if out, err := boxctl(nil, "session", "exec", id, "s1", "id -u; pwd"); err != nil || out != "1100\n/home/agent/work\n" {
		t.Errorf("session: %q %v", out, err)
	}

	// A fork keeps the source's default user and workdir.
	fr, err := env.api.ForkSandbox(ctx(t), connect.NewRequest(&boxdv1.ForkSandboxRequest{SandboxId: id}))
	if err != nil {
		t.Fatal(err)
	}
	fork := fr.Msg.Sandboxes[0].Id
	t.Cleanup(func() { _, _ = boxctl(nil, "rm", "-f", fork) })
	if got := sh(t, fork, "id -u; pwd"); got != "1100\n/home/agent/work\n" || fr.Msg.Sandboxes[0].User != "agent" {
		t.Errorf("fork: %q, user %q; want agent's", got, fr.Msg.Sandboxes[0].User)
	}

	// create --user overrides the image's USER.
	root := newSandbox(t, "--image", img, "--user", "0:0")
	if got := sh(t, root, "id -u; pwd"); got != "0\n/home/agent/work\n" {
		t.Errorf("create --user 0:0: %q", got)
	}
	if sb := inspect(t, root); sb.User != "0:0" {
		t.Errorf("inspect user %q, want 0:0", sb.User)
	}
	// A user the sandbox does not know fails the create, naming the field;
	// a spec that is no user at all fails before anything is made.
	n := countSandboxes(t)
	for _, u := range []string{"nosuchuser", "a b"} {
		_, stderr, code := boxctlRun("create", "--image", img, "--user", u)
		if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "user") {
			t.Errorf("create --user %q: exit %d, stderr %q; want invalid_argument naming user", u, code, stderr)
		}
	}
	if got := countSandboxes(t); got != n {
		t.Errorf("%d sandboxes after the failed creates, want %d", got, n)
	}
}
