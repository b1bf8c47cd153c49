//go:build linux

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/boxd-dev/boxd/internal/testenv"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// dockerBindSetup is bindSetup's directories and users with a boxd that
// also serves the Docker API.
func dockerBindSetup(t *testing.T, ns string) (*bindSetup, string) {
	t.Helper()
	sockGroup, adminGroup, ua, ub, _ := hostUsers(t)
	top := t.TempDir()
	s := &bindSetup{ua: ua, ub: ub, root: filepath.Join(top, "root"), outside: filepath.Join(top, "outside")}
	s.mine, s.theirs = filepath.Join(s.root, "mine"), filepath.Join(s.root, "theirs")
	for _, d := range []string{filepath.Dir(top), top} {
		must(t, os.Chmod(d, 0o755))
	}
	s.mkdir(t, s.root, 0, 0, 0o755)
	s.mkdir(t, s.mine, ua.uid, ua.gid, 0o700)
	s.mkdir(t, s.theirs, ub.uid, ub.gid, 0o700)
	s.mkdir(t, s.outside, ua.uid, ua.gid, 0o755)
	s.write(t, filepath.Join(s.mine, "hello"), "hello\n", ua)
	d, sock := dockerDaemon(t, ns, "--socket-group", sockGroup, "--admin-group", adminGroup, "--allow-bind", s.root)
	s.d = d
	t.Cleanup(func() { detachBinds(d) })
	must(t, os.Chmod(filepath.Dir(d.dir), 0o711))
	s.apiA = apiAs(ua, d.sock)
	return s, sock
}

// TestDockerBindsPorts: HostConfig.Binds and Mounts of type bind are
// boxd's binds (under --allow-bind, as the caller, ID-mapped), a name is
// a boxd volume, PortBindings are published ports; everything create
// --bind and --publish refuse is a 400 naming the Docker field, with
// nothing made.
func TestDockerBindsPorts(t *testing.T) {
	s, sock := dockerBindSetup(t, namespace+"-dockerbinds")
	ca := dockerHTTP(sock, testenv.DialAs(s.ua.uid, s.ua.gid, s.ua.groups, sock))
	if _, err := s.apiA.volumes.CreateVolume(ctx(t), connect.NewRequest(&boxdv1.CreateVolumeRequest{Name: "dvol"})); err != nil {
		t.Fatal(err)
	}
	code, body := dcall(t, ca, "POST", "/containers/create?name=bd1", map[string]any{"Image": testImage,
		"Cmd": []string{"sh", "-c", "echo hi > /data/out; echo v > /vol/f; mkdir -p /tmp/www; echo page > /tmp/www/index.html; exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"},
		"HostConfig": map[string]any{"Binds": []string{s.mine + ":/data", "dvol:/vol"},
			"Mounts":       []map[string]any{{"Type": "bind", "Source": s.mine, "Target": "/ro", "ReadOnly": true}},
			"PortBindings": map[string]any{"8080/tcp": []map[string]string{{"HostIp": "", "HostPort": ""}}}}})
	if code != 201 {
		t.Fatalf("create with binds, a volume and a port: %d %s", code, body)
	}
	if code, body := dcall(t, ca, "POST", "/containers/bd1/start", nil); code != 204 {
		t.Fatalf("start: %d %s", code, body)
	}
	out := filepath.Join(s.mine, "out")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(out); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if uid, gid := ownerOnHost(t, out); uid != s.ua.uid || gid != s.ua.gid {
		t.Errorf("/data/out on the host: %d:%d, want the caller's %d:%d", uid, gid, s.ua.uid, s.ua.gid)
	}
	var insp struct {
		Mounts []struct {
			Type, Source, Name, Destination string
			RW                              bool
		}
		NetworkSettings struct {
			Ports map[string][]struct{ HostIp, HostPort string }
		}
	}
	dget(t, ca, "/containers/bd1/json", &insp)
	if len(insp.Mounts) != 3 || insp.Mounts[0].Source != s.mine || insp.Mounts[1].Destination != "/ro" || insp.Mounts[1].RW ||
		insp.Mounts[2].Type != "volume" || insp.Mounts[2].Name != "dvol" {
		t.Errorf("inspect's Mounts: %+v", insp.Mounts)
	}
	p := insp.NetworkSettings.Ports["8080/tcp"]
	if len(p) != 1 || p[0].HostIp != "127.0.0.1" || p[0].HostPort == "" || p[0].HostPort == "0" {
		t.Fatalf("inspect's ports: %+v", insp.NetworkSettings.Ports)
	}
	if got := dockerOK(t, sock, "port", "bd1"); got != "8080/tcp -> 127.0.0.1:"+p[0].HostPort+"\n" {
		t.Errorf("docker port: %q", got)
	}
	if got := httpGetRetry(t, "http://127.0.0.1:"+p[0].HostPort+"/index.html"); got != "page\n" {
		t.Errorf("through the published port: %q", got)
	}
	if _, _, code := dockerCLI(t, sock, "exec", "bd1", "touch", "/ro/x"); code == 0 {
		t.Errorf("a write to a read-only Mounts bind worked")
	}
	dockerBindRefusals(t, s, sock, ca)
	if code, body := dcall(t, ca, "DELETE", "/containers/bd1?force=1", nil); code != 204 {
		t.Errorf("rm: %d %s", code, body)
	}
	if b, err := os.ReadFile(filepath.Join(s.mine, "hello")); err != nil || string(b) != "hello\n" {
		t.Errorf("the bound directory after rm: %q %v", b, err)
	}
}

func dockerBindRefusals(t *testing.T, s *bindSetup, sock string, ca *http.Client) {
	planted := filepath.Join(s.root, "planted")
	s.mkdir(t, planted, s.ua.uid, s.ua.gid, 0o755)
	must(t, os.Symlink("/etc", filepath.Join(planted, "etc")))
	for _, c := range []struct {
		hc    map[string]any
		words []string
	}{
		{map[string]any{"Binds": []string{s.outside + ":/w"}}, []string{"HostConfig.Binds[0]: ", s.outside}},
		{map[string]any{"Binds": []string{s.theirs + ":/w"}}, []string{"HostConfig.Binds[0]: ", s.theirs}},
		{map[string]any{"Binds": []string{planted + "/etc:/w"}}, []string{"HostConfig.Binds[0]: ", "leads out"}},
		{map[string]any{"Binds": []string{s.mine + ":/w", s.mine + ":/w:z"}}, []string{"HostConfig.Binds[1]: ", `"z"`}},
		{map[string]any{"Binds": []string{"novol:/w"}}, []string{"HostConfig.Binds[0]: ", "novol"}},
		{map[string]any{"Mounts": []map[string]any{{"Type": "bind", "Source": s.outside, "Target": "/w"}}}, []string{"HostConfig.Mounts[0]: ", s.outside}},
		{map[string]any{"Mounts": []map[string]any{{"Type": "bind", "Source": s.mine, "Target": "/w", "BindOptions": map[string]any{"Propagation": "rshared"}}}},
			[]string{"HostConfig.Mounts[0].BindOptions: refused"}},
		{map[string]any{"Mounts": []map[string]any{{"Type": "npipe", "Source": "x", "Target": "/w"}}}, []string{"HostConfig.Mounts[0].Type: "}},
		{map[string]any{"PortBindings": map[string]any{"80/tcp": []map[string]string{{"HostPort": "80"}}}}, []string{`HostConfig.PortBindings["80/tcp"]: `, "ip_unprivileged_port_start"}},
		{map[string]any{"PortBindings": map[string]any{"80/tcp": []map[string]string{{"HostIp": "0.0.0.0", "HostPort": "18080"}}}}, []string{`HostConfig.PortBindings["80/tcp"]: `, "--allow-publish-address"}},
		{map[string]any{"PortBindings": map[string]any{"53/udp": []map[string]string{{}}}}, []string{`HostConfig.PortBindings["53/udp"]: `, "tcp"}},
	} {
		code, body := dcall(t, ca, "POST", "/containers/create", map[string]any{"Image": testImage, "Cmd": []string{"true"}, "HostConfig": c.hc})
		var e errorMsg
		_ = json.Unmarshal([]byte(body), &e)
		ok := code == 400
		for _, w := range c.words {
			ok = ok && strings.Contains(e.Message, w)
		}
		if !ok {
			t.Errorf("create with %v: %d %s; want 400 with %q", c.hc, code, body, c.words)
		}
	}
	// Host root's bind would write as host root: refused as create --bind
	// refuses it.
	if _, errOut, code := dockerCLI(t, sock, "run", "-d", "-v", s.mine+":/w", testImage, "true"); code != 125 ||
		!strings.Contains(errOut, "HostConfig.Binds[0]: ") || !strings.Contains(errOut, "host root") {
		t.Errorf("host root's docker run -v: exit %d %q", code, errOut)
	}
	var left []struct{ Names []string }
	dget(t, ca, "/containers/json?all=1", &left)
	if len(left) != 1 || left[0].Names[0] != "/bd1" {
		t.Errorf("refused creates left containers: %+v", left)
	}
}

func httpGetRetry(t *testing.T, url string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return string(b)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDockerImageLoad: docker load of a docker save tar (the classic
// layout: manifest.json, a config and a layer.tar per layer) makes an
// image docker run runs; a non-admin's load is a 403 (TestDockerOwnership
// checks it with the other image changes).
func TestDockerImageLoad(t *testing.T) {
	_, sock := dockerDaemon(t, namespace+"-dockerload")
	tarball := dockerSaveTar(t, "loaded/busybox:v1")
	if got := dockerOK(t, sock, "load", "-i", tarball); got != "Loaded image: loaded/busybox:v1\n" {
		t.Errorf("docker load: %q", got)
	}
	if got := dockerOK(t, sock, "run", "--rm", "loaded/busybox:v1", "echo", "from the loaded image"); got != "from the loaded image\n" {
		t.Errorf("run of the loaded image: %q", got)
	}
	if got := dockerOK(t, sock, "images", "--format", "{{.Repository}}:{{.Tag}}", "loaded/busybox"); got != "loaded/busybox:v1\n" {
		t.Errorf("docker images: %q", got)
	}
	hc := dockerHTTP(sock, nil)
	if code, body := dcall(t, hc, "POST", "/images/load", []byte("not a tar")); code != 400 {
		t.Errorf("load of garbage: %d %s", code, body)
	}
}

// dockerSaveTar writes the test image as docker save writes an image:
// from ctr's export, the config as ID.json, each layer uncompressed as
// ID/layer.tar, manifest.json and repositories.
func dockerSaveTar(t *testing.T, tag string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.tar")
	if out, err := exec.Command(env.ctrd.Ctr, "--address", env.ctrd.Address, "-n", namespace,
		"images", "export", "--local", src, testImage).CombinedOutput(); err != nil {
		t.Fatalf("ctr export: %v %s", err, out)
	}
	files := readTar(t, src)
	blob := func(d digest.Digest) []byte {
		return files[path.Join("blobs", d.Algorithm().String(), d.Encoded())]
	}
	var index ocispec.Index
	mustJSON(t, files["index.json"], &index)
	var manifest ocispec.Manifest
	mustJSON(t, blob(index.Manifests[0].Digest), &manifest)
	out := map[string][]byte{}
	cfg := manifest.Config.Digest.Encoded() + ".json"
	out[cfg] = blob(manifest.Config.Digest)
	var layers []string
	for _, l := range manifest.Layers {
		b := blob(l.Digest)
		if strings.Contains(l.MediaType, "gzip") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			must(t, err)
			b, err = io.ReadAll(zr)
			must(t, err)
		}
		name := digest.FromBytes(b).Encoded() + "/layer.tar"
		out[name] = b
		layers = append(layers, name)
	}
	repo, tg, _ := strings.Cut(tag, ":")
	out["manifest.json"], _ = json.Marshal([]map[string]any{{"Config": cfg, "RepoTags": []string{tag}, "Layers": layers}})
	out["repositories"], _ = json.Marshal(map[string]map[string]string{repo: {tg: strings.TrimSuffix(layers[len(layers)-1], "/layer.tar")}})
	dst := filepath.Join(dir, "saved.tar")
	writeTar(t, dst, out)
	return dst
}
