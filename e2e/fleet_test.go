//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/boxd-dev/boxd/internal/fleet/api/v1alpha1"
	"github.com/boxd-dev/boxd/internal/instance"
	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// fleet is a boxd fleet on this host: a real kube-apiserver and etcd on
// loopback, three boxds as three nodes (each its own --instance, socket,
// namespace, port and uid blocks) with a reporter each, the controller
// and the gateway.
type fleet struct {
	kube       *testenv.Kube
	kc         client.Client
	dir        string
	nodes      []*fleetNode
	srvCA      testCA
	assertCert string // the control plane's identity: CN boxd-fleet
	assertKey  string
	clientCA   *clientCA
	gateway    string // https://127.0.0.1:PORT
	controller string // boxd-controller binary
	procs      map[string]*exec.Cmd
}

type fleetNode struct {
	name, addr string
	d          *daemon
}

// fleetBinaries builds boxd-controller and boxd-gateway.
func fleetBinaries(t *testing.T, dir string) (controller, gateway string) {
	t.Helper()
	controller, gateway = filepath.Join(dir, "boxd-controller"), filepath.Join(dir, "boxd-gateway")
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/boxd-controller", "./cmd/boxd-gateway")
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the fleet's binaries: %v\n%s", err, out)
	}
	return controller, gateway
}

// fleetInstances picks n instance names whose slots differ.
func fleetInstances(t *testing.T, n int) []string {
	seen := map[int]bool{}
	var out []string
	for i := 1; len(out) < n && i < 100; i++ {
		name := fmt.Sprintf("fleet-%d", i)
		nm, err := instance.Derive(name)
		must(t, err)
		if !seen[nm.Slot] {
			seen[nm.Slot] = true
			out = append(out, name)
		}
	}
	return out
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	bin, err := testenv.KubeBinaries()
	must(t, err)
	k, err := testenv.StartKube(bin)
	must(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log:\n%s", k.LogTail("kube-apiserver", 30))
		}
		_ = k.Stop()
	})
	f := &fleet{kube: k, dir: t.TempDir(), procs: map[string]*exec.Cmd{}}
	_ = os.Chmod(f.dir, 0o755)
	kubectlMust(t, k, "apply", "-f", filepath.Join(testenv.RepoRoot(), "deploy", "kubernetes", "crds"))
	kubectlMust(t, k, "wait", "--for", "condition=established", "--timeout", "30s", "crd", "--all")
	cfg, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	must(t, err)
	s := runtime.NewScheme()
	must(t, fleetv1.AddToScheme(s))
	f.kc, err = client.New(cfg, client.Options{Scheme: s})
	must(t, err)
	f.srvCA = newTestCA(t, f.dir)
	f.clientCA = newClientCA(t, f.dir, "fleet-ca")
	f.assertCert, f.assertKey = f.clientCA.issue(t, "boxd-fleet")
	var gw string
	f.controller, gw = fleetBinaries(t, f.dir)
	for i, inst := range fleetInstances(t, 3) {
		f.startNode(t, fmt.Sprintf("node-%d", i+1), inst)
	}
	f.run(t, "controller", f.controller, "--kubeconfig", k.Kubeconfig, "run", "--node-ca", f.srvCA.caFile,
		"--node-cert", f.assertCert, "--node-key", f.assertKey, "--node-timeout", "4s", "--resync", "1s", "--health-addr", "0")
	f.startGateway(t, gw)
	return f
}

// startNode starts a boxd as node name (instance inst) and its reporter.
func (f *fleet) startNode(t *testing.T, name, inst string) {
	t.Helper()
	port := fmt.Sprint(freePort(t))
	d := startBoxd(t, "boxd-e2e-"+inst, true, "--instance", inst, "--listen", "tcp://127.0.0.1:"+port,
		"--tls-cert", f.srvCA.certFile, "--tls-key", f.srvCA.keyFile, "--client-ca", f.clientCA.file,
		"--owner-asserter", "cn:boxd-fleet")
	n := &fleetNode{name: name, addr: "127.0.0.1:" + port, d: d}
	f.nodes = append(f.nodes, n)
	f.run(t, "report-"+name, f.controller, "--kubeconfig", f.kube.Kubeconfig, "report", "--node", name,
		"--address", n.addr, "--socket", d.sock, "--interval", "1s")
}

// run starts a fleet program, logging to DIR/NAME.log, ended at cleanup.
func (f *fleet) run(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	log := filepath.Join(f.dir, name+".log")
	logf, err := os.Create(log)
	must(t, err)
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(t, cmd.Start())
	f.procs[name] = cmd
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, tail(log))
		}
	})
}

// startGateway creates users' tokens and starts the gateway.
func (f *fleet) startGateway(t *testing.T, bin string) {
	t.Helper()
	port := freePort(t)
	f.gateway = fmt.Sprintf("https://127.0.0.1:%d", port)
	f.run(t, "gateway", bin, "--kubeconfig", f.kube.Kubeconfig, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--tls-cert", f.srvCA.certFile, "--tls-key", f.srvCA.keyFile, "--tokens", filepath.Join(f.dir, "gateway-tokens.json"),
		"--node-ca", f.srvCA.caFile, "--node-cert", f.assertCert, "--node-key", f.assertKey)
	waitFor(t, 30*time.Second, "the gateway to listen", func() bool {
		c, err := tls.Dial("tcp", strings.TrimPrefix(f.gateway, "https://"), &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// token makes a gateway token for uid.
func (f *fleet) token(t *testing.T, name string, uid uint32) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(f.dir, "boxd-gateway"), "token", "create", "--tokens", filepath.Join(f.dir, "gateway-tokens.json"),
		"--name", name, "--uid", fmt.Sprint(uid), "--scope", "write").Output()
	must(t, err)
	return strings.TrimSpace(string(out))
}

func kubectlMust(t *testing.T, k *testenv.Kube, args ...string) string {
	t.Helper()
	out, err := k.Kubectl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sandbox reads a Sandbox resource.
func (f *fleet) sandbox(t *testing.T, name string) *fleetv1.Sandbox {
	t.Helper()
	var sb fleetv1.Sandbox
	must(t, f.kc.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, &sb))
	return &sb
}

// waitPhase waits for a Sandbox's phase (and reason, if given).
func (f *fleet) waitPhase(t *testing.T, name, phase, reason string) *fleetv1.Sandbox {
	t.Helper()
	var sb *fleetv1.Sandbox
	deadline := time.Now().Add(60 * time.Second)
	for {
		sb = f.sandbox(t, name)
		if sb.Status.Phase == phase && (reason == "" || sb.Status.Reason == reason) {
			return sb
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: status %+v, want phase %s %s", name, sb.Status, phase, reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (f *fleet) node(name string) *fleetNode {
	for _, n := range f.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// boxctl runs boxctl against the gateway with token.
func (f *fleet) boxctl(token string, args ...string) (string, string, int) {
	cmd := exec.Command(env.boxctl, append([]string{"--host", f.gateway, "--tls-ca", f.srvCA.caFile}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "BOXD_SOCKET=/nonexistent/boxd.sock", apiwire.TokenEnv + "=" + token}
	var stdout, stderr bytes.Buffer
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

// nodeAPI is a client of a node's TLS listener with the certificate in
// certFile, sending extra headers.
func (f *fleet) nodeAPI(t *testing.T, n *fleetNode, certFile, keyFile string, hdr http.Header) boxdv1connect.SandboxServiceClient {
	t.Helper()
	pemBytes, err := os.ReadFile(f.srvCA.caFile)
	must(t, err)
	cfg := &tls.Config{RootCAs: x509.NewCertPool()}
	cfg.RootCAs.AppendCertsFromPEM(pemBytes)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	must(t, err)
	cfg.Certificates = []tls.Certificate{pair}
	proto := new(http.Protocols)
	proto.SetHTTP2(true)
	rt := headersRT{hdr, &http.Transport{TLSClientConfig: cfg, Protocols: proto}}
	return boxdv1connect.NewSandboxServiceClient(apiwire.ClientOver(rt), "https://"+n.addr)
}

type headersRT struct {
	h    http.Header
	next http.RoundTripper
}

func (h headersRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header[k] = v
	}
	return h.next.RoundTrip(r)
}

// newSandbox creates a Sandbox resource owned by uid through client-go.
func (f *fleet) newSandbox(t *testing.T, name string, uid uint32) {
	t.Helper()
	sb := &fleetv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: fleetv1.SandboxSpec{Owner: fmt.Sprint(uid), Template: &fleetv1.SandboxSpecTemplate{Memory: "64m", TTL: "10m"}}}
	must(t, f.kc.Create(context.Background(), sb))
}

// TestFleet runs a fleet of three nodes against a real API server:
// sandboxes made as resources (kubectl and client-go) are placed on
// nodes, reached through the gateway with boxctl --host as their owner
// only, reflected in status when deleted on their node or when their
// node's boxd stops, and deleted on their node with their resource.
func TestFleet(t *testing.T) {
	_, _, ua, ub, _ := hostUsers(t)
	f := startFleet(t)
	waitFor(t, 30*time.Second, "three BoxdNodes reporting", func() bool {
		var l fleetv1.BoxdNodeList
		if f.kc.List(context.Background(), &l) != nil || len(l.Items) != 3 {
			return false
		}
		for _, n := range l.Items {
			if time.Since(n.Status.HeartbeatTime.Time) > 3*time.Second || n.Status.FreeMemoryBytes <= 0 {
				return false
			}
		}
		return true
	})
	tokA, tokB := f.token(t, "a", ua.uid), f.token(t, "b", ub.uid)

	// One sandbox through kubectl, two through client-go.
	manifest := filepath.Join(f.dir, "sb-kubectl.yaml")
	must(t, os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: boxd.dev/v1alpha1
kind: Sandbox
metadata: {name: sb-kubectl, namespace: default}
spec:
  owner: "%d"
  template: {memory: 64m, ttl: 10m}
`, ua.uid)), 0o644))
	kubectlMust(t, f.kube, "apply", "-f", manifest)
	f.newSandbox(t, "sb-gone", ua.uid)
	f.newSandbox(t, "sb-b", ub.uid)
	sb := f.waitPhase(t, "sb-kubectl", fleetv1.PhaseRunning, "")
	gone := f.waitPhase(t, "sb-gone", fleetv1.PhaseRunning, "")
	sbB := f.waitPhase(t, "sb-b", fleetv1.PhaseRunning, "")
	if f.node(sb.Status.Node) == nil || sb.Status.BoxdID == "" {
		t.Fatalf("sb-kubectl's status: %+v", sb.Status)
	}

	t.Run("exec-through-gateway", func(t *testing.T) {
		out, stderr, code := f.boxctl(tokA, "exec", sb.Status.BoxdID, "--", "sh", "-c", "echo via gateway; id -u")
		if code != 0 || !strings.HasPrefix(out, "via gateway\n") {
			t.Fatalf("boxctl --host GATEWAY exec: %d %q %s", code, out, stderr)
		}
	})
	t.Run("owner-only", func(t *testing.T) {
		// B, through the gateway, on A's sandbox: not found, as a missing id.
		_, stderr, code := f.boxctl(tokB, "exec", sb.Status.BoxdID, "--", "true")
		if code == 0 || !(strings.Contains(stderr, "not found") || strings.Contains(stderr, "not_found")) {
			t.Fatalf("b's exec on a's sandbox through the gateway: %d %s", code, stderr)
		}
		if out, stderr, code := f.boxctl(tokB, "exec", sbB.Status.BoxdID, "--", "echo", "b"); code != 0 || out != "b\n" {
			t.Fatalf("b's exec on b's sandbox: %d %q %s", code, out, stderr)
		}
		// Another certificate of the fleet's CA asserting A's uid to the
		// node directly: no caller at all.
		n := f.node(sb.Status.Node)
		cert, key := f.clientCA.issue(t, "intruder")
		hdr := http.Header{apiwire.AssertOwnerHeader: {fmt.Sprint(ua.uid)}, apiwire.AssertScopeHeader: {"write"}}
		_, err := f.nodeAPI(t, n, cert, key, hdr).GetSandbox(context.Background(), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: sb.Status.BoxdID}))
		wantCodeAll(t, "a certificate other than the asserter's asserting an owner", err, connect.CodeUnauthenticated)
		// The asserter's certificate asserting B: not found.
		hdr.Set(apiwire.AssertOwnerHeader, fmt.Sprint(ub.uid))
		_, err = f.nodeAPI(t, n, f.assertCert, f.assertKey, hdr).GetSandbox(context.Background(), connect.NewRequest(&boxdv1.GetSandboxRequest{Id: sb.Status.BoxdID}))
		wantCodeAll(t, "the asserter asserting b on a's sandbox", err, connect.CodeNotFound)
	})
	t.Run("deleted-on-node", func(t *testing.T) {
		n := f.node(gone.Status.Node)
		if out, err := exec.Command(env.boxctl, "--socket", n.d.sock, "rm", "-f", gone.Status.BoxdID).CombinedOutput(); err != nil {
			t.Fatalf("rm on the node: %v %s", err, out)
		}
		f.waitPhase(t, "sb-gone", fleetv1.PhaseGone, "DeletedOnNode")
	})
	t.Run("node-lost", func(t *testing.T) {
		n := f.node(sbB.Status.Node)
		n.d.kill()
		lost := f.waitPhase(t, "sb-b", fleetv1.PhaseLost, "NodeNotReporting")
		if !strings.Contains(lost.Status.Message, n.name) {
			t.Errorf("Lost's message does not name the node: %q", lost.Status.Message)
		}
		n.d.start(t) // the node comes back with its sandboxes
		f.waitPhase(t, "sb-b", fleetv1.PhaseRunning, "")
	})
	f.deleteAll(t)
}

// deleteAll deletes every Sandbox resource and checks that no node keeps
// a sandbox of theirs.
func (f *fleet) deleteAll(t *testing.T) {
	t.Helper()
	kubectlMust(t, f.kube, "delete", "sandboxes", "--all", "-n", "default", "--timeout", "60s")
	var l fleetv1.SandboxList
	must(t, f.kc.List(context.Background(), &l))
	if len(l.Items) != 0 {
		t.Fatalf("Sandbox resources left: %d", len(l.Items))
	}
	for _, n := range f.nodes {
		resp, err := n.d.api.ListSandboxes(n.d.c, connect.NewRequest(&boxdv1.ListSandboxesRequest{All: true}))
		if err != nil || len(resp.Msg.GetSandboxes()) != 0 {
			t.Errorf("node %s keeps sandboxes: %v %v", n.name, err, resp)
		}
	}
}
