//go:build linux

package e2e

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/google/nftables"

	"github.com/boxd-dev/boxd/internal/instance"
	"github.com/boxd-dev/boxd/internal/testenv"
)

// besideEnv names the instance of a second boxd the egress tests run
// beside when set (BOXD_E2E_BESIDE=e2e-3 go test ./e2e -run 'TestEgress');
// TestEgress runs beside instance e2e-2 without it. egressNet.start starts
// it in the same network namespace, with an egress sandbox of its own, so
// the tests show that a second instance on the host changes nothing of
// theirs.
const besideEnv = "BOXD_E2E_BESIDE"

// beside is a boxd started with --instance NAME in an egressNet's B, with
// every name derived: socket, state dir, namespace, bridge, subnet, table.
type beside struct {
	n   instance.Names
	cmd *exec.Cmd
	log string
	id  string // its egress sandbox, which reaches H1
}

// boxctl runs the CLI with --instance, as a user of the instance would.
func (b *beside) boxctl(args ...string) (string, string, int) {
	cmd := exec.Command(env.boxctl, append([]string{"--instance", b.n.Instance}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return stdout.String(), stderr.String(), code
}

func (b *beside) must(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, code := b.boxctl(args...)
	if code != 0 {
		t.Fatalf("boxctl --instance %s %s: exit %d: %s\nboxd log:\n%s", b.n.Instance, strings.Join(args, " "), code, stderr, tail(b.log))
	}
	return strings.TrimSpace(out)
}

// startBeside starts instance name's boxd in e's B and an egress sandbox
// in it that reaches H1; cleanup removes both and the instance's state.
func startBeside(t *testing.T, e *egressNet, name string) *beside {
	t.Helper()
	n, err := instance.Derive(name)
	must(t, err)
	for _, p := range []string{n.StateDir, n.SocketDir} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("instance %s: %s exists already; is such an instance running on this host?", name, p)
		}
	}
	b := &beside{n: n, log: filepath.Join(e.dir, "beside.log")}
	logf, err := os.OpenFile(b.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	must(t, err)
	defer logf.Close()
	b.cmd = exec.Command("nsenter", "--net=/run/netns/"+e.b, "--", env.boxd, "--instance", name,
		"--containerd", env.ctrd.Address, "--default-image", testImage, "--init-binary", env.initBin,
		"--runc", testenv.Runc, "--dns-upstream", h1Addr+":53", "--debug", "--warm-pool", "0")
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	must(t, b.cmd.Start())
	t.Cleanup(func() { b.stop(t) })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", n.Socket); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s did not listen on %s:\n%s", name, n.Socket, tail(b.log))
		}
	}
	// --force: an earlier test of this run may have imported it into
	// the instance's namespace of the shared test containerd.
	b.must(t, "image", "import", "--force", "--rootfs", env.busybox, "--name", testImage)
	b.id = b.must(t, "create", "--memory", "64m", "--network", "egress", "--allow", h1Addr+"/32:80")
	// exec through the front binary, which finds the socket by --instance.
	out := b.must(t, "exec", b.id, "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 `+h1Addr+` 80`)
	if !strings.HasSuffix(out, "h1") {
		t.Fatalf("instance %s's sandbox: GET h1 = %q", name, out)
	}
	return b
}

func (b *beside) stop(t *testing.T) {
	if b.id != "" {
		if _, stderr, code := b.boxctl("rm", "-f", b.id); code != 0 {
			t.Errorf("instance %s: rm %s: %s", b.n.Instance, b.id, stderr)
		}
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	_, _ = b.cmd.Process.Wait()
	_ = testenv.ReleaseGvisorRoots(b.n.StateDir)
	for _, p := range []string{b.n.StateDir, b.n.SocketDir} {
		if err := os.RemoveAll(p); err != nil {
			t.Errorf("instance %s: %v", b.n.Instance, err)
		}
	}
}

// TestInstances runs two boxds side by side in one network namespace, the
// egress tests' (its own boxd, and instance e2e-2 with every name
// derived), an egress sandbox in each, and checks that they share no
// host-global resource and both work.
func TestInstances(t *testing.T) {
	e := newEgressNet(t)
	e.start(t)
	t.Cleanup(func() { e.stop(t, syscall.SIGTERM) })
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)
	b := e.beside
	if b == nil {
		b = startBeside(t, e, "e2e-2")
	}
	id := e.create(t, h1Addr+"/32:80")
	e.reaches(t, id, "http://"+h1Addr+"/", "h1")

	type facts struct{ socket, stateDir, bridge, table, cgroup, cniCache, addr, subnet string }
	a := facts{socket: e.socket, stateDir: e.stateDir, bridge: "boxdt0", table: "boxd", subnet: "10.213.0.0/24",
		cniCache: "/var/lib/cni/results/boxdt0-" + id + "-eth0"}
	o := facts{socket: b.n.Socket, stateDir: b.n.StateDir, bridge: b.n.Bridge, table: b.n.NftTable, subnet: b.n.Subnet,
		cniCache: filepath.Join(b.n.StateDir, "network", "cni", "results", b.n.Bridge+"-"+b.id+"-eth0")}
	var aUID, oUID uint64
	a.addr, a.cgroup, aUID = sandboxFacts(t, e.namespace, id, func(args ...string) string { return e.must(t, args...) })
	o.addr, o.cgroup, oUID = sandboxFacts(t, b.n.Namespace, b.id, func(args ...string) string { return b.must(t, args...) })

	// Each sandbox on its own bridge, address in its own subnet.
	links, err := exec.Command("ip", "-n", e.b, "-o", "link", "show", "type", "veth").CombinedOutput()
	must(t, err)
	for _, f := range []facts{a, o} {
		if !netip.MustParsePrefix(f.subnet).Contains(netip.MustParseAddr(f.addr)) {
			t.Errorf("address %s not in its instance's subnet %s", f.addr, f.subnet)
		}
		if !strings.Contains(string(links), "master "+f.bridge+" ") {
			t.Errorf("no veth on bridge %s:\n%s", f.bridge, links)
		}
		if _, err := os.Stat(f.cniCache); err != nil {
			t.Errorf("libcni's cached result: %v", err)
		}
		if c, err := net.Dial("unix", f.socket); err != nil {
			t.Errorf("socket %s: %v", f.socket, err)
		} else {
			c.Close()
		}
	}
	if matches, _ := filepath.Glob("/var/lib/cni/results/*" + b.id + "*"); len(matches) > 0 {
		t.Errorf("instance %s cached results in the host's /var/lib/cni: %v", b.n.Instance, matches)
	}
	// Each sandbox's rules in its own instance's tables only.
	nsf, err := os.Open("/run/netns/" + e.b)
	must(t, err)
	defer nsf.Close()
	nc, err := nftables.New(nftables.WithNetNSFd(int(nsf.Fd())))
	must(t, err)
	chains, err := nc.ListChainsOfTableFamily(nftables.TableFamilyINet)
	must(t, err)
	where := map[string]string{}
	for _, ch := range chains {
		where[ch.Name] += ch.Table.Name + " "
	}
	if where["sb_"+id] != a.table+" " || where["sb_"+b.id] != o.table+" " {
		t.Errorf("sandbox chains: %s in [%s], %s in [%s]; want tables %s and %s", id, where["sb_"+id], b.id, where["sb_"+b.id], a.table, o.table)
	}
	if !strings.HasPrefix(o.cgroup, b.n.CgroupParent+"/") || !strings.HasPrefix(a.cgroup, "/"+e.namespace+"/") {
		t.Errorf("cgroups %s and %s, want under /%s and %s", a.cgroup, o.cgroup, e.namespace, b.n.CgroupParent)
	}
	if aUID >= uint64(b.n.UIDBase) || oUID < uint64(b.n.UIDBase) || oUID >= uint64(b.n.UIDBase)+instance.UIDSpan {
		t.Errorf("sandbox root's host uids %d and %d; instance %s's span starts at %d", aUID, oUID, b.n.Instance, b.n.UIDBase)
	}
	for _, pair := range [][2]string{{a.socket, o.socket}, {a.stateDir, o.stateDir}, {a.bridge, o.bridge}, {a.table, o.table},
		{a.cgroup, o.cgroup}, {filepath.Dir(a.cniCache), filepath.Dir(o.cniCache)}} {
		if pair[0] == pair[1] {
			t.Errorf("both instances use %s", pair[0])
		}
	}
	// Both still work.
	e.reaches(t, id, "http://"+h1Addr+"/", "h1")
	if out := b.must(t, "exec", b.id, "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 `+h1Addr+` 80`); !strings.HasSuffix(out, "h1") {
		t.Errorf("instance %s's sandbox: GET h1 = %q", b.n.Instance, out)
	}
}

// sandboxFacts reads sandbox id's address (inspect), the cgroup of its
// init (memory controller, as /proc shows it) and the host uid its root
// maps to.
func sandboxFacts(t *testing.T, ns, id string, boxctl func(...string) string) (addr, cgroup string, uid uint64) {
	t.Helper()
	var sb struct {
		Network struct {
			Address string `json:"address"`
		} `json:"network"`
	}
	must(t, json.Unmarshal([]byte(boxctl("inspect", id)), &sb))
	c := namespaces.WithNamespace(ctx(t), ns)
	ctr, err := env.ctr.LoadContainer(c, id)
	must(t, err)
	task, err := ctr.Task(c, nil)
	must(t, err)
	pid := strconv.Itoa(int(task.Pid()))
	cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
	must(t, err)
	for _, l := range strings.Split(string(cg), "\n") {
		if parts := strings.SplitN(l, ":", 3); len(parts) == 3 && (strings.Contains(parts[1], "memory") || parts[1] == "") && cgroup == "" {
			cgroup = parts[2]
		}
	}
	um, err := os.ReadFile("/proc/" + pid + "/uid_map")
	must(t, err)
	if f := strings.Fields(string(um)); len(f) >= 2 {
		uid, _ = strconv.ParseUint(f[1], 10, 64)
	}
	return sb.Network.Address, cgroup, uid
}
