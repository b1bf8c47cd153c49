//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/internal/dockerapi"
	"github.com/boxd-dev/boxd/internal/testenv"
)

// More of the Docker endpoint (docs/docker.md): stats, top, update,
// rename and events with the docker CLI and raw HTTP, and containers
// followed across a boxd restart.

// dget decodes a GET's JSON answer into v, failing unless it is a 200.
func dget(t *testing.T, hc *http.Client, path string, v any) {
	t.Helper()
	code, body := dcall(t, hc, "GET", path, nil)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

type dockerStats struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	PidsStats struct {
		Current, Limit int64
	} `json:"pids_stats"`
	MemoryStats struct {
		Usage, Limit int64
	} `json:"memory_stats"`
	CPUStats struct {
		CPUUsage struct {
			TotalUsage uint64 `json:"total_usage"`
		} `json:"cpu_usage"`
		SystemUsage uint64 `json:"system_cpu_usage"`
		OnlineCPUs  int    `json:"online_cpus"`
	} `json:"cpu_stats"`
	PreCPUStats struct {
		SystemUsage uint64 `json:"system_cpu_usage"`
	} `json:"precpu_stats"`
}

// TestDockerStatsTopUpdateRename: docker stats (one-shot, two-sample and
// streamed, in Docker's shape), top, update of the limits boxd changes
// on a live sandbox (and a 400 for what it does not), rename.
func TestDockerStatsTopUpdateRename(t *testing.T) {
	_, sock := dockerDaemon(t, namespace+"-dockerstats")
	hc := dockerHTTP(sock, nil)
	id := strings.TrimSpace(dockerOK(t, sock, "run", "-d", "--name", "st1", "-m", "64m", "--pids-limit", "50", testImage,
		"sh", "-c", "while :; do :; done & sleep 300"))

	var one dockerStats
	dget(t, hc, "/containers/st1/stats?stream=false&one-shot=true", &one)
	if one.ID != id || one.Name != "/st1" || one.MemoryStats.Limit != 64<<20 || one.PidsStats.Limit != 50 || one.PidsStats.Current < 2 ||
		one.MemoryStats.Usage <= 0 || one.CPUStats.SystemUsage == 0 || one.CPUStats.OnlineCPUs < 1 {
		t.Errorf("one-shot stats: %+v", one)
	}
	var two dockerStats
	dget(t, hc, "/containers/"+id[:8]+"/stats?stream=false", &two)
	if two.PreCPUStats.SystemUsage == 0 || two.CPUStats.SystemUsage <= two.PreCPUStats.SystemUsage || two.CPUStats.CPUUsage.TotalUsage == 0 {
		t.Errorf("stats with a base sample: %+v", two)
	}
	streamStats(t, hc, id)
	if got := dockerOK(t, sock, "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}} {{.PIDs}}", "st1"); !strings.HasPrefix(got, "st1 ") ||
		!strings.Contains(got, "/ 64MiB") {
		t.Errorf("docker stats --no-stream: %q", got)
	}

	top := dockerOK(t, sock, "top", "st1")
	if !strings.Contains(top, "sleep 300") || !strings.Contains(top, "PID") || strings.Contains(top, "/.boxd/init") {
		t.Errorf("docker top: %q", top)
	}
	if code, body := dcall(t, hc, "GET", "/containers/st1/top?ps_args=-o%20pid", nil); code != 400 || !strings.Contains(body, "ps_args") {
		t.Errorf("top with ps_args: %d %s", code, body)
	}

	dockerOK(t, sock, "update", "-m", "128m", "--memory-swap", "128m", "--pids-limit", "70", "--cpus", "0.25", "st1")
	if got := dockerOK(t, sock, "inspect", "-f", "{{.HostConfig.Memory}} {{.HostConfig.PidsLimit}} {{.HostConfig.NanoCpus}}", "st1"); got != "134217728 70 250000000\n" {
		t.Errorf("inspect after update: %q", got)
	}
	dget(t, hc, "/containers/st1/stats?stream=false&one-shot=true", &one)
	if one.MemoryStats.Limit != 128<<20 {
		t.Errorf("stats' memory limit after update: %d", one.MemoryStats.Limit)
	}
	if _, errOut, code := dockerCLI(t, sock, "update", "--restart", "always", "st1"); code == 0 || !strings.Contains(errOut, "RestartPolicy:") {
		t.Errorf("update --restart always: exit %d %q", code, errOut)
	}
	for field, body := range map[string]any{
		"CgroupParent: refused":    map[string]any{"CgroupParent": "/x"},
		"Frob: boxd does not know": map[string]any{"Frob": 1},
		"Memory: ":                 map[string]any{"Memory": 1024},
	} {
		if code, got := dcall(t, hc, "POST", "/containers/st1/update", body); code != 400 || !strings.Contains(got, field) {
			t.Errorf("update %v: %d %s, want 400 naming %s", body, code, got, field)
		}
	}

	dockerOK(t, sock, "rename", "st1", "st2")
	if got := dockerOK(t, sock, "inspect", "-f", "{{.Name}} {{.Id}}", "st2"); got != "/st2 "+id+"\n" {
		t.Errorf("inspect after rename: %q", got)
	}
	if _, errOut, code := dockerCLI(t, sock, "inspect", "st1"); code == 0 || !strings.Contains(errOut, "No such") {
		t.Errorf("the old name after rename: exit %d %q", code, errOut)
	}
	dockerOK(t, sock, "create", "--name", "st3", testImage, "true")
	if code, body := dcall(t, hc, "POST", "/containers/st2/rename?name=st3", nil); code != 409 || !strings.Contains(body, "already exists") {
		t.Errorf("rename onto a taken name: %d %s", code, body)
	}
	if code, body := dcall(t, hc, "POST", "/containers/st2/rename?name=a/b", nil); code != 400 || !strings.Contains(body, "name:") {
		t.Errorf("rename to a bad name: %d %s", code, body)
	}
	dockerOK(t, sock, "rm", "-f", "st2", "st3")
}

// streamStats reads two samples of a streamed stats, a second apart.
func streamStats(t *testing.T, hc *http.Client, id string) {
	t.Helper()
	resp, err := hc.Get("http://docker/containers/" + id + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	start := time.Now()
	var a, b dockerStats
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("streamed stats, first: %v", err)
	}
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("streamed stats, second: %v", err)
	}
	if el := time.Since(start); el < 800*time.Millisecond || el > 5*time.Second || b.PreCPUStats.SystemUsage == 0 || b.ID != id {
		t.Errorf("streamed stats: second sample after %v: %+v", el, b)
	}
}

type dockerEvent struct {
	Type, Action string
	Actor        struct {
		ID         string
		Attributes map[string]string
	}
	TimeNano int64 `json:"timeNano"`
}

// TestDockerEvents: docker events from boxd's event log, in Docker's
// shape, with since/until and the container, event and label filters;
// another user sees none of them, an admin all.
func TestDockerEvents(t *testing.T) {
	sockGroup, adminGroup, a, b, admin := hostUsers(t)
	_, sock := dockerDaemon(t, namespace+"-dockerevents", "--socket-group", sockGroup, "--admin-group", adminGroup)
	since := strconv.FormatInt(time.Now().Add(-time.Second).Unix(), 10)
	as := func(u hostUser) *http.Client { return dockerHTTP(sock, testenv.DialAs(u.uid, u.gid, u.groups, sock)) }
	ca, cb, cadm := as(a), as(b), as(admin)
	code, body := dcall(t, ca, "POST", "/containers/create?name=ev1", map[string]any{"Image": testImage, "Cmd": []string{"sh", "-c", "exit 3"},
		"Labels": map[string]string{"role": "ev"}})
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created struct{ Id string }
	must(t, json.Unmarshal([]byte(body), &created))
	id := created.Id
	// A follower started now sees what happens next, live. A container
	// made here starts with its sandbox (at create, as boxd's events have
	// it) and dies with its main command.
	live := make(chan []dockerEvent, 1)
	go func() {
		live <- readEvents(ca, "/events?filters="+filterJSON(map[string][]string{"container": {"ev1"}}), 2)
	}()
	time.Sleep(300 * time.Millisecond)
	if code, body := dcall(t, ca, "POST", "/containers/"+id+"/start", nil); code != 204 {
		t.Fatalf("start: %d %s", code, body)
	}
	dcall(t, ca, "POST", "/containers/"+id+"/wait", nil)
	if code, body := dcall(t, ca, "DELETE", "/containers/"+id, nil); code != 204 {
		t.Fatalf("rm: %d %s", code, body)
	}
	select {
	case evs := <-live:
		if acts := actions(evs); acts != "die destroy" {
			t.Errorf("live events: %q (%v)", acts, evs)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("no live events")
	}
	until := strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10)
	q := "/events?since=" + since + "&until=" + until
	evs := readEvents(ca, q+"&filters="+filterJSON(map[string][]string{"container": {id}}), -1)
	if acts := actions(evs); acts != "create start die destroy" {
		t.Errorf("a's events of its container: %q (%v)", acts, evs)
	}
	for _, e := range evs {
		if e.Type != "container" || e.Actor.ID != id || e.Actor.Attributes["name"] != "ev1" || e.Actor.Attributes["role"] != "ev" || e.TimeNano == 0 {
			t.Errorf("event shape: %+v", e)
		}
		if e.Action == "die" && e.Actor.Attributes["exitCode"] != "3" {
			t.Errorf("die's exitCode: %+v", e)
		}
	}
	if acts := actions(readEvents(ca, q+"&filters="+filterJSON(map[string][]string{"event": {"die"}, "label": {"role=ev"}}), -1)); acts != "die" {
		t.Errorf("event=die label=role=ev: %q", acts)
	}
	if acts := actions(readEvents(ca, q+"&filters="+filterJSON(map[string][]string{"label": {"role=other"}}), -1)); acts != "" {
		t.Errorf("label=role=other: %q", acts)
	}
	if evs := readEvents(cb, q, -1); len(evs) != 0 {
		t.Errorf("b sees a's events: %v", evs)
	}
	if acts := actions(readEvents(cadm, q+"&filters="+filterJSON(map[string][]string{"container": {id}}), -1)); acts != "create start die destroy" {
		t.Errorf("the admin's events of a's container: %q", acts)
	}
	if code, body := dcall(t, ca, "GET", "/events?filters="+filterJSON(map[string][]string{"volume": {"x"}}), nil); code != 400 || !strings.Contains(body, "invalid filter 'volume'") {
		t.Errorf("an unknown filter: %d %s", code, body)
	}
	// The CLI reads the same stream.
	out := dockerOK(t, sock, "events", "--since", since, "--until", until, "--filter", "container="+id, "--format", "{{.Action}} {{.Actor.Attributes.name}}")
	if out != "create ev1\nstart ev1\ndie ev1\ndestroy ev1\n" {
		t.Errorf("docker events: %q", out)
	}
}

func filterJSON(f map[string][]string) string {
	b, _ := json.Marshal(f)
	return strings.NewReplacer("{", "%7B", "}", "%7D", "\"", "%22", "[", "%5B", "]", "%5D", "=", "%3D", ",", "%2C", ":", "%3A").Replace(string(b))
}

// readEvents reads the events of path, at most n (-1: until the end).
func readEvents(hc *http.Client, path string, n int) []dockerEvent {
	resp, err := hc.Get("http://docker" + path)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []dockerEvent
	dec := json.NewDecoder(resp.Body)
	for n < 0 || len(out) < n {
		var e dockerEvent
		if dec.Decode(&e) != nil {
			break
		}
		out = append(out, e)
	}
	return out
}

func actions(evs []dockerEvent) string {
	var a []string
	for _, e := range evs {
		a = append(a, e.Action)
	}
	return strings.Join(a, " ")
}

// TestDockerRestart: containers made through the endpoint are followed
// again after boxd is killed and started: the main command ran on under
// the init, its output meanwhile reaches the log once, ps, inspect and
// exec work, and stop and wait report its exit.
func TestDockerRestart(t *testing.T) {
	d, sock := dockerDaemon(t, namespace+"-dockerrestart")
	id := strings.TrimSpace(dockerOK(t, sock, "run", "-d", "--name", "rs1", testImage, "sh", "-c",
		"echo before; trap 'echo bye; exit 5' TERM; sleep 2; echo during; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo after; while :; do sleep 0.1; done"))
	waitLog(t, sock, "rs1", "before\n")
	d.kill()
	// While boxd is down the main command writes on (the init keeps it
	// and its output); the log gets that once, and "before" not again.
	time.Sleep(3 * time.Second)
	d.start(t)
	waitDockerSocket(t, sock)
	if got := dockerOK(t, sock, "ps", "--format", "{{.ID}} {{.Names}} {{.State}}"); got != id[:12]+" rs1 running\n" {
		t.Errorf("ps after restart: %q", got)
	}
	if got := dockerOK(t, sock, "exec", "rs1", "touch", "/tmp/go"); got != "" {
		t.Errorf("exec after restart: %q", got)
	}
	waitLog(t, sock, "rs1", "before\nduring\nafter\n")
	dockerOK(t, sock, "stop", "-t", "5", "rs1")
	if got := dockerOK(t, sock, "wait", "rs1"); got != "5\n" {
		t.Errorf("wait after stop: %q", got)
	}
	if got := dockerOK(t, sock, "logs", "rs1"); got != "before\nduring\nafter\nbye\n" {
		t.Errorf("logs across the restart: %q", got)
	}
	if got := dockerOK(t, sock, "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}} {{.State.Error}}", "rs1"); got != "exited 5 \n" {
		t.Errorf("inspect after stop: %q", got)
	}
	dockerOK(t, sock, "rm", "rs1")
}

func waitLog(t *testing.T, sock, name, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, _, _ := dockerCLI(t, sock, "logs", name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("logs of %s: %q, want %q", name, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitDockerSocket(t *testing.T, sock string) {
	t.Helper()
	hc := dockerHTTP(sock, nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if resp, err := hc.Get("http://docker/_ping"); err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the Docker socket did not come back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDockerode runs the wrapper's flow with dockerode (npm, the
// committed lockfile of testdata/dockerode): create with limits and no
// network, start, exec with separate streams and an exit code, a tar PUT
// read back, stats, pause, list by label, stop, remove, wait and logs, and
// a refused field as a 400 naming it.
func TestDockerode(t *testing.T) {
	_, sock := dockerDaemon(t, namespace+"-dockerode")
	src, err := filepath.Abs(filepath.Join("testdata", "dockerode"))
	if err != nil {
		t.Fatal(err)
	}
	mods, err := testenv.NodeModules(src)
	if err != nil {
		t.Fatalf("npm packages: %v", err)
	}
	dir := t.TempDir()
	text, err := os.ReadFile(filepath.Join(src, "flow.mjs"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "flow.mjs"), text, 0o644))
	must(t, os.Symlink(mods, filepath.Join(dir, "node_modules")))
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, "node", filepath.Join(dir, "flow.mjs"), sock, testImage).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `{"ok":true}`) {
		t.Fatalf("dockerode flow: %v\n%s", err, out)
	}
}

// TestDockerGoClient runs the wrapper's flow with Docker's own Go client
// (the module e2e/dockergo, so boxd never links it), and holds the field
// tables against that client's types: a field of container.Config,
// HostConfig or ExecOptions in no table fails here until it is classified.
func TestDockerGoClient(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dockergo")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = "dockergo"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build e2e/dockergo: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "fields").Output()
	if err != nil {
		t.Fatalf("dockergo fields: %v", err)
	}
	var fields map[string][]string
	must(t, json.Unmarshal(out, &fields))
	for _, group := range []string{"create", "hostconfig", "exec"} {
		if len(fields[group]) < 10 {
			t.Fatalf("Docker's %s type has %d fields?", group, len(fields[group]))
		}
		known := map[string]bool{}
		for _, f := range dockerapi.FieldNames(group) {
			known[f] = true
		}
		for _, f := range fields[group] {
			if !known[f] {
				t.Errorf("Docker's %s field %s is in no table of internal/dockerapi/fields.go: classify it", group, f)
			}
		}
	}
	_, sock := dockerDaemon(t, namespace+"-dockergo")
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(cctx, bin, "flow", sock, testImage).CombinedOutput(); err != nil || string(out) != "ok\n" {
		t.Fatalf("Go client flow: %v\n%s", err, out)
	}
}
