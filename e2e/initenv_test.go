//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// importImageWithEnv imports the test image again as name, with extra added
// to its config's env: ctr exports it as an OCI layout, and the config, manifest
// and index are rewritten (new digests) on the way.
func importImageWithEnv(t *testing.T, name string, extra []string) {
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
	put := func(v any) ocispec.Descriptor {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		d := digest.FromBytes(b)
		files[path.Join("blobs", d.Algorithm().String(), d.Encoded())] = b
		return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
	}
	var index ocispec.Index
	mustJSON(t, files["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != ocispec.MediaTypeImageManifest {
		t.Fatalf("exported index is not one manifest: %+v", index.Manifests)
	}
	var manifest ocispec.Manifest
	mustJSON(t, blob(index.Manifests[0].Digest), &manifest)
	var config ocispec.Image
	mustJSON(t, blob(manifest.Config.Digest), &config)

	config.Config.Env = append(config.Config.Env, extra...)
	d := put(config)
	manifest.Config.Digest, manifest.Config.Size = d.Digest, d.Size
	d = put(manifest)
	index.Manifests[0].Digest, index.Manifests[0].Size = d.Digest, d.Size
	b, _ := json.Marshal(index)
	files["index.json"] = b
	delete(files, "manifest.json") // docker's view of the old config

	dst := filepath.Join(dir, "env.tar")
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

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func readTar(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[path.Clean(h.Name)] = b
	}
}

func writeTar(t *testing.T, p string, files map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(p, buf.Bytes(), 0o644))
}

// initEnviron reads the init's environment from the host, as root.
func initEnviron(t *testing.T, pid int64) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// TestEnvDoesNotSteerTheInit: an image's env and a create request's env
// reach commands, and none of it reaches the init's own environment, where
// GODEBUG, GOMAXPROCS, GOTRACEBACK ... would steer its Go runtime. The
// same holds for an init boxd restarts.
func TestEnvDoesNotSteerTheInit(t *testing.T) {
	const image = "envtest/busybox:1"
	importImageWithEnv(t, image, []string{"GODEBUG=madvdontneed=1", "GOGC=off", "FROM_IMAGE=1"})
	id := newSandbox(t, "--image", image, "--env", "GOMAXPROCS=3", "--env", "GOTRACEBACK=crash",
		"--env", "GOMEMLIMIT=1KiB", "--env", "MINE=yes", "--env", "GODEBUG=panicnil=1")
	want := []string{"FROM_IMAGE=1", "GODEBUG=panicnil=1", "GOGC=off", "GOMAXPROCS=3", "GOMEMLIMIT=1KiB", "GOTRACEBACK=crash", "HOME=/root", "MINE=yes"}

	check := func(t *testing.T) {
		// Once the init answers, runc's own process has become the init
		// (runc's environment is there until then).
		out := sh(t, id, "env | sort")
		pid := inspect(t, id).InitPid
		for _, kv := range initEnviron(t, pid) {
			// PATH from boxd, HOME from runc; nothing from the image or
			// the request.
			if k, _, _ := strings.Cut(kv, "="); k != "PATH" && k != "HOME" {
				t.Errorf("the init's environment holds %q", kv)
			}
		}
		for _, kv := range want {
			if !strings.Contains(out, "\n"+kv+"\n") && !strings.HasPrefix(out, kv+"\n") {
				t.Errorf("commands lack %s:\n%s", kv, out)
			}
		}
		if !strings.Contains(out, "HOSTNAME="+id+"\n") {
			t.Errorf("commands lack HOSTNAME=%s:\n%s", id, out)
		}
		// inspect shows the env commands get, without boxd's HOSTNAME.
		got := inspect(t, id).Env
		for _, kv := range want {
			if kv != "HOME=/root" && !contains(got, kv) {
				t.Errorf("inspect env lacks %s: %q", kv, got)
			}
		}
		for _, kv := range got {
			if strings.HasPrefix(kv, "HOSTNAME=") || strings.HasPrefix(kv, "BOXD_") {
				t.Errorf("inspect env holds %s", kv)
			}
		}
	}
	t.Run("created", check)

	pid := inspect(t, id).InitPid
	if err := syscall.Kill(int(pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitRestarted(t, id, pid)
	t.Run("restarted", check)
}
