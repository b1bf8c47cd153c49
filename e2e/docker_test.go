//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/testenv"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// The Docker Engine API endpoint (--docker-socket, docs/docker.md), driven
// by clients this project did not write: Debian's docker CLI and docker-py.

// dockerDaemon starts a boxd serving the Docker API; it returns the boxd
// and the Docker socket's path.
func dockerDaemon(t *testing.T, ns string, flags ...string) (*daemon, string) {
	t.Helper()
	dir := t.TempDir()
	// Other users reach the socket: its directory and the test's own
	// temporary directory above it are searchable.
	_ = os.Chmod(dir, 0o711)
	_ = os.Chmod(filepath.Dir(dir), 0o711)
	sock := filepath.Join(dir, "docker.sock")
	d := startBoxd(t, ns, true, append([]string{"--docker-socket", sock, "--docker-default-ttl", "20m"}, flags...)...)
	return d, sock
}

// dockerCLI runs Debian's docker client against sock.
func dockerCLI(t *testing.T, sock string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	bin, err := testenv.DockerCLI()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+sock, "DOCKER_CONFIG="+t.TempDir(), "DOCKER_CLI_HINTS=false")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("docker %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// dockerOK runs the docker client and fails the test unless it exits 0.
func dockerOK(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, errOut, code := dockerCLI(t, sock, args...)
	if code != 0 {
		t.Fatalf("docker %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// refusedFlags are docker run flags whose HostConfig field boxd refuses,
// with the field the 400 must name.
var refusedFlags = []struct {
	flags []string
	field string
}{
	{[]string{"--privileged"}, "HostConfig.Privileged"},
	{[]string{"--cap-add", "SYS_ADMIN"}, "HostConfig.CapAdd"},
	{[]string{"--network", "host"}, "HostConfig.NetworkMode"},
	{[]string{"--network", "container:x"}, "HostConfig.NetworkMode"},
	{[]string{"--pid", "host"}, "HostConfig.PidMode"},
	{[]string{"--ipc", "host"}, "HostConfig.IpcMode"},
	{[]string{"--uts", "host"}, "HostConfig.UTSMode"},
	{[]string{"--userns", "host"}, "HostConfig.UsernsMode"},
	{[]string{"--cgroupns", "host"}, "HostConfig.CgroupnsMode"},
	{[]string{"--device", "/dev/null"}, "HostConfig.Devices"},
	{[]string{"--gpus", "all"}, "HostConfig.DeviceRequests"},
	{[]string{"--device-cgroup-rule", "c 1:3 mr"}, "HostConfig.DeviceCgroupRules"},
	{[]string{"--cgroup-parent", "/x"}, "HostConfig.CgroupParent"},
	{[]string{"--volumes-from", "other"}, "HostConfig.VolumesFrom"},
	{[]string{"--oom-kill-disable"}, "HostConfig.OomKillDisable"},
	{[]string{"--security-opt", "seccomp=unconfined"}, "HostConfig.SecurityOpt"},
	{[]string{"--sysctl", "net.ipv4.ip_forward=1"}, "HostConfig.Sysctls"},
	{[]string{"--runtime", "nvidia"}, "HostConfig.Runtime"},
	{[]string{"-v", "/etc:/hostetc"}, "HostConfig.Binds[0]"}, // no --allow-bind
	{[]string{"--restart", "always"}, "HostConfig.RestartPolicy"},
}

// TestDockerCLI runs a sandbox wrapper's flow with the docker CLI: run
// with limits, exec with separate stdout, stderr and exit code, a tar
// round trip, logs, list by label, stop, rm; and every refused flag is a
// 400 naming its field, with nothing made.
func TestDockerCLI(t *testing.T) {
	_, sock := dockerDaemon(t, namespace+"-dockercli")
	if v := dockerOK(t, sock, "version", "--format", "{{.Server.APIVersion}} {{.Server.MinAPIVersion}}"); v != "1.43 1.41\n" {
		t.Errorf("server version %q, want 1.43 1.41", v)
	}
	id := strings.TrimSpace(dockerOK(t, sock, "run", "-d", "--name", "dk1", "--label", "boxd.test=dk", "-m", "64m", "--cpus", "0.5",
		"--pids-limit", "64", "-e", "GREETING=hi", testImage, "sh", "-c", "echo out $GREETING; echo err >&2; sleep 300"))
	got := dockerOK(t, sock, "inspect", "-f", "{{.Id}} {{.Name}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{.HostConfig.PidsLimit}} {{.State.Status}} {{.Boxd.TTL}}", "dk1")
	if want := id + " /dk1 67108864 500000000 64 running 20m0s\n"; got != want {
		t.Errorf("inspect: %q, want %q", got, want)
	}
	out, errOut, code := dockerCLI(t, sock, "exec", "dk1", "sh", "-c", "echo O; echo E >&2; exit 3")
	if out != "O\n" || errOut != "E\n" || code != 3 {
		t.Errorf("exec: stdout %q stderr %q exit %d, want O, E, 3", out, errOut, code)
	}
	if out, errOut, code := dockerCLI(t, sock, "exec", "-i", "dk1", "cat"); code != 0 || out != "" {
		t.Errorf("exec -i cat with empty stdin: %q %q exit %d", out, errOut, code)
	}

	// A tree in and out again with docker cp (archive PUT, HEAD, GET).
	src := filepath.Join(t.TempDir(), "tree")
	must(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "sub", "f.txt"), []byte("round trip\n"), 0o640))
	dockerOK(t, sock, "cp", src, "dk1:/tmp/")
	if got := dockerOK(t, sock, "exec", "dk1", "cat", "/tmp/tree/sub/f.txt"); got != "round trip\n" {
		t.Errorf("file copied in: %q", got)
	}
	back := t.TempDir()
	dockerOK(t, sock, "cp", "dk1:/tmp/tree", back)
	if b, err := os.ReadFile(filepath.Join(back, "tree", "sub", "f.txt")); err != nil || string(b) != "round trip\n" {
		t.Errorf("file copied out: %q %v", b, err)
	}
	if _, errOut, code := dockerCLI(t, sock, "cp", "dk1:/nonexistent", back); code == 0 || !strings.Contains(errOut, "No such container:path: dk1:/nonexistent") {
		t.Errorf("cp of a missing path: exit %d %q", code, errOut)
	}

	out, errOut, _ = dockerCLI(t, sock, "logs", "dk1")
	if out != "out hi\n" || errOut != "err\n" {
		t.Errorf("logs: stdout %q stderr %q", out, errOut)
	}
	if got := dockerOK(t, sock, "ps", "--filter", "label=boxd.test=dk", "--format", "{{.Names}} {{.State}}"); got != "dk1 running\n" {
		t.Errorf("ps by label: %q", got)
	}
	if got := dockerOK(t, sock, "ps", "-a", "--filter", "label=boxd.test=other", "--format", "{{.Names}}"); got != "" {
		t.Errorf("ps by another label: %q", got)
	}
	dockerOK(t, sock, "pause", "dk1")
	if got := dockerOK(t, sock, "inspect", "-f", "{{.State.Status}} {{.State.Paused}}", "dk1"); got != "paused true\n" {
		t.Errorf("after pause: %q", got)
	}
	dockerOK(t, sock, "unpause", "dk1")
	dockerOK(t, sock, "stop", "-t", "1", "dk1")
	if got := dockerOK(t, sock, "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", "dk1"); got != "exited 143\n" && got != "exited 137\n" {
		t.Errorf("after stop: %q, want exited 143 (or 137)", got)
	}
	if got := dockerOK(t, sock, "wait", "dk1"); got != "143\n" && got != "137\n" {
		t.Errorf("wait after stop: %q", got)
	}
	dockerOK(t, sock, "rm", "dk1")
	if got := dockerOK(t, sock, "ps", "-a", "-q"); got != "" {
		t.Errorf("ps -a after rm: %q", got)
	}

	// A main command that ends on its own: its exit code is wait's.
	id = strings.TrimSpace(dockerOK(t, sock, "run", "-d", testImage, "sh", "-c", "echo bye; exit 7"))
	if got := dockerOK(t, sock, "wait", id); got != "7\n" {
		t.Errorf("wait: %q, want 7", got)
	}
	if got := dockerOK(t, sock, "logs", id); got != "bye\n" {
		t.Errorf("logs of an exited container: %q", got)
	}
	dockerOK(t, sock, "rm", id)

	// docker run without -d attaches before it starts; --rm waits for
	// the removal.
	out, errOut, code = dockerCLI(t, sock, "run", "--rm", testImage, "sh", "-c", "echo to-out; echo to-err >&2; exit 4")
	if out != "to-out\n" || errOut != "to-err\n" || code != 4 {
		t.Errorf("run --rm: stdout %q stderr %q exit %d, want to-out, to-err, 4", out, errOut, code)
	}
	if got := dockerOK(t, sock, "ps", "-a", "-q"); got != "" {
		t.Errorf("run --rm left %q", got)
	}

	for _, c := range refusedFlags {
		args := append(append([]string{"run", "-d"}, c.flags...), testImage, "true")
		_, errOut, code := dockerCLI(t, sock, args...)
		if code != 125 || !strings.Contains(errOut, c.field+":") {
			t.Errorf("docker run %v: exit %d, stderr %q; want 125 naming %s", c.flags, code, errOut, c.field)
		}
	}
	if got := dockerOK(t, sock, "ps", "-a", "-q"); got != "" {
		t.Errorf("refused runs left containers: %q", got)
	}
}

// dockerHTTP is a client of the Docker socket speaking plain HTTP.
func dockerHTTP(sock string, dial func(ctx context.Context, _, _ string) (net.Conn, error)) *http.Client {
	if dial == nil {
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}
	}
	return &http.Client{Transport: &http.Transport{DialContext: dial}}
}

// dcall makes one request and returns the status and body.
func dcall(t *testing.T, hc *http.Client, method, path string, body any) (int, string) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, "http://docker"+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDockerAPIShape checks what clients rely on beside the CLI's flow:
// versions, Docker's error shape, unknown endpoints and fields, _ping.
func TestDockerAPIShape(t *testing.T) {
	_, sock := dockerDaemon(t, namespace+"-dockerapi")
	hc := dockerHTTP(sock, nil)
	for _, c := range []struct {
		method, path string
		body         any
		code         int
		msg          string
	}{
		{"GET", "/_ping", nil, 200, "OK"},
		{"HEAD", "/_ping", nil, 200, ""},
		{"GET", "/v1.41/_ping", nil, 200, "OK"},
		{"GET", "/v1.99/version", nil, 400, `{"message":"client version 1.99 is too new. Maximum supported API version is 1.43"}`},
		{"GET", "/v1.12/version", nil, 400, `"message":"client version 1.12 is too old.`},
		{"GET", "/v1.43/nothing/here", nil, 404, `{"message":"page not found: GET /nothing/here"}`},
		{"GET", "/containers/nosuch/json", nil, 404, `{"message":"No such container: nosuch"}`},
		{"POST", "/containers/create", map[string]any{"Image": testImage, "Cmd": []string{"true"}, "HostConfig": map[string]any{"FooBar": 1}},
			400, `HostConfig.FooBar: boxd does not know this field`},
		{"POST", "/containers/create", map[string]any{"Image": testImage, "Cmd": []string{"true"}, "Frobnicate": "x"}, 400, `Frobnicate: boxd does not know`},
		{"POST", "/containers/create", map[string]any{"Image": testImage, "Cmd": []string{"true"}, "HostConfig": map[string]any{"StorageOpt": map[string]string{"dm.basesize": "1g"}}},
			400, `HostConfig.StorageOpt: \"dm.basesize\" refused`},
		{"POST", "/containers/create", map[string]any{"Image": "no/such:image", "Cmd": []string{"true"}}, 404, `No such image: no/such:image`},
		{"POST", "/containers/create", map[string]any{"Image": testImage, "Cmd": []string{"true"}, "HostConfig": map[string]any{"Memory": 1024}}, 400, `HostConfig.Memory: `},
	} {
		code, body := dcall(t, hc, c.method, c.path, c.body)
		if code != c.code || !strings.Contains(body, c.msg) {
			t.Errorf("%s %s: %d %s; want %d with %s", c.method, c.path, code, body, c.code, c.msg)
		}
	}
	// An unknown zero field is what clients send for what they did not set.
	code, body := dcall(t, hc, "POST", "/containers/create", map[string]any{"Image": testImage, "Cmd": []string{"true"},
		"HostConfig": map[string]any{"FooBar": nil, "Privileged": false, "Binds": []string{}}})
	if code != 201 {
		t.Errorf("create with zero unknown and refused fields: %d %s", code, body)
	}
}

func hostileTar(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		h := h
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		must(t, tw.WriteHeader(&h))
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write(make([]byte, h.Size))
		}
	}
	must(t, tw.Close())
	return b.Bytes()
}

// TestDockerPy runs the wrapper's flow with docker-py (Debian's
// python3-docker, which scripts/setup.sh installs).
func TestDockerPy(t *testing.T) {
	_, sock := dockerDaemon(t, namespace+"-dockerpy")
	out, err := exec.Command("/usr/bin/python3", filepath.Join("testdata", "docker_py_flow.py"), sock).CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("docker-py flow: %v\n%s", err, out)
	}
}

// TestDockerOwnership: the Docker socket identifies callers as boxd's own
// socket does. Another user's container is "No such container" to every
// call, its exec instances "No such exec instance", its containers are
// not listed; a non-admin cannot change images; an admin sees it all.
func TestDockerOwnership(t *testing.T) {
	sockGroup, adminGroup, a, b, admin := hostUsers(t)
	_, sock := dockerDaemon(t, namespace+"-dockerown", "--socket-group", sockGroup, "--admin-group", adminGroup)
	as := func(u hostUser) *http.Client { return dockerHTTP(sock, testenv.DialAs(u.uid, u.gid, u.groups, sock)) }
	ca, cb, cadm := as(a), as(b), as(admin)
	code, body := dcall(t, ca, "POST", "/containers/create?name=mine", map[string]any{"Image": testImage, "Cmd": []string{"sleep", "300"}})
	if code != 201 {
		t.Fatalf("a's create: %d %s", code, body)
	}
	var created struct{ Id string }
	must(t, json.Unmarshal([]byte(body), &created))
	id := created.Id
	if code, body := dcall(t, ca, "POST", "/containers/"+id+"/start", nil); code != 204 {
		t.Fatalf("a's start: %d %s", code, body)
	}
	code, body = dcall(t, ca, "POST", "/containers/"+id+"/exec", map[string]any{"Cmd": []string{"true"}})
	if code != 201 {
		t.Fatalf("a's exec create: %d %s", code, body)
	}
	var ex struct{ Id string }
	must(t, json.Unmarshal([]byte(body), &ex))
	for _, ref := range []string{id, "mine", id[:6]} {
		want := `{"message":"No such container: ` + ref + `"}` + "\n"
		for _, c := range []struct{ method, path string }{
			{"GET", "/containers/" + ref + "/json"}, {"POST", "/containers/" + ref + "/start"}, {"POST", "/containers/" + ref + "/stop"},
			{"POST", "/containers/" + ref + "/kill"}, {"POST", "/containers/" + ref + "/wait"}, {"GET", "/containers/" + ref + "/logs?stdout=1"},
			{"GET", "/containers/" + ref + "/archive?path=/etc/hostname"}, {"PUT", "/containers/" + ref + "/archive?path=/tmp"},
			{"POST", "/containers/" + ref + "/exec"}, {"DELETE", "/containers/" + ref + "?force=1"},
			{"GET", "/containers/" + ref + "/stats?stream=0"}, {"GET", "/containers/" + ref + "/top"},
			{"POST", "/containers/" + ref + "/update"}, {"POST", "/containers/" + ref + "/rename?name=taken"},
		} {
			var payload any
			if c.path == "/containers/"+ref+"/exec" {
				payload = map[string]any{"Cmd": []string{"true"}}
			}
			if code, body := dcall(t, cb, c.method, c.path, payload); code != 404 || body != want {
				t.Errorf("b: %s %s: %d %q, want 404 %q", c.method, c.path, code, body, want)
			}
		}
	}
	for _, c := range []struct{ method, path string }{{"GET", "/exec/" + ex.Id + "/json"}, {"POST", "/exec/" + ex.Id + "/start"}} {
		if code, body := dcall(t, cb, c.method, c.path, map[string]any{}); code != 404 || !strings.Contains(body, "No such exec instance") {
			t.Errorf("b: %s %s: %d %s", c.method, c.path, code, body)
		}
	}
	if _, body := dcall(t, cb, "GET", "/containers/json?all=1", nil); strings.Contains(body, id) {
		t.Errorf("b's list shows a's container: %s", body)
	}
	if _, body := dcall(t, ca, "GET", "/containers/json", nil); !strings.Contains(body, id) {
		t.Errorf("a's list lacks its container: %s", body)
	}
	if code, body := dcall(t, cadm, "GET", "/containers/"+id+"/json", nil); code != 200 {
		t.Errorf("admin's inspect of a's container: %d %s", code, body)
	}
	for _, c := range []struct{ method, path string }{
		{"POST", "/images/create?fromImage=localhost:1/x&tag=latest"}, {"POST", "/images/" + testImage + "/tag?repo=x/y&tag=z"},
		{"DELETE", "/images/" + testImage}, {"POST", "/images/load"},
	} {
		if code, body := dcall(t, ca, c.method, c.path, nil); code != 403 || !strings.Contains(body, "--admin-group") {
			t.Errorf("a: %s %s: %d %s, want 403", c.method, c.path, code, body)
		}
	}
	if code, body := dcall(t, ca, "GET", "/images/json", nil); code != 200 || !strings.Contains(body, testImage) {
		t.Errorf("a's image list: %d %s", code, body)
	}
	if code, body := dcall(t, ca, "DELETE", "/containers/"+id+"?force=1", nil); code != 204 {
		t.Errorf("a's rm: %d %s", code, body)
	}
}

// TestDockerHostileTar: a tar PUT through the archive endpoint meets the
// init's copy-in checks, so it is refused exactly as boxd's own CopyIn
// (boxctl cp) refuses it, and nothing lands outside the target.
func TestDockerHostileTar(t *testing.T) {
	d, sock := dockerDaemon(t, namespace+"-dockertar")
	hc := dockerHTTP(sock, nil)
	code, body := dcall(t, hc, "POST", "/containers/create", map[string]any{"Image": testImage, "Cmd": []string{"sleep", "300"}})
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created struct{ Id string }
	must(t, json.Unmarshal([]byte(body), &created))
	id := created.Id
	if code, body := dcall(t, hc, "POST", "/containers/"+id+"/start", nil); code != 204 {
		t.Fatalf("start: %d %s", code, body)
	}
	for name, tarball := range map[string][]byte{
		"traversal": hostileTar(t, tar.Header{Name: "../../etc/evil", Typeflag: tar.TypeReg, Size: 1}),
		"link out":  hostileTar(t, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, tar.Header{Name: "l/evil", Typeflag: tar.TypeReg, Size: 1}),
		"hardlink":  hostileTar(t, tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}),
		"device":    hostileTar(t, tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1}),
	} {
		code, body := dcall(t, hc, "PUT", "/containers/"+id+"/archive?path=/tmp", tarball)
		boxdErr := copyInErr(t, d, id, tarball)
		var got errorMsg
		_ = json.Unmarshal([]byte(body), &got)
		// The same outcome as boxd's own CopyIn: the same refusal, or
		// (a device node, which the init does not make) the same success.
		if boxdErr == "" && code != 200 || boxdErr != "" && (code < 400 || code >= 500 || got.Message != boxdErr) {
			t.Errorf("%s: %d %s; boxd's own CopyIn says %q", name, code, body, boxdErr)
		}
		if name != "device" && boxdErr == "" {
			t.Errorf("%s: boxd's own CopyIn accepted it", name)
		}
	}
	if got := dockerOK(t, sock, "exec", id, "sh", "-c", "ls /etc/evil /tmp/evil /tmp/dev 2>&1 | grep -c 'No such file' || true"); got != "3\n" {
		t.Errorf("hostile tars left files: %q", got)
	}
}

type errorMsg struct{ Message string }

// copyInErr sends tarball to boxd's own CopyIn (what boxctl cp uses) and
// returns its error message.
func copyInErr(t *testing.T, d *daemon, id string, tarball []byte) string {
	t.Helper()
	st := rpcclient.New(d.sock).CopyIn(d.c)
	if err := st.Send(&boxdv1.CopyInRequest{SandboxId: id, Path: "/tmp", Data: tarball}); err != nil {
		t.Fatal(err)
	}
	_, err := st.CloseAndReceive()
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return ""
}
