//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestSDKPythonRemote runs the Python SDK against boxd's TCP listener over
// TLS with a token (sdk/python/tests/remote_client.py), every setting from
// BOXD_HOST, BOXD_TOKEN and BOXD_TLS_CA, and BOXD_SOCKET naming a path with
// no socket: create, exec (unary and streaming), a file written and read
// back, with the sync and asyncio clients; a wrong token gets
// boxd.Unauthenticated. The sandboxes it made belong to the token's user,
// as the admin socket reports.
func TestSDKPythonRemote(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "sdk", "python")
	runRemoteSDK(t, "boxd-e2e-pyremote", 2, dir, python, filepath.Join("tests", "remote_client.py"))
}

// TestSDKTypeScriptRemote is TestSDKPythonRemote for the TypeScript SDK
// (sdk/typescript/test/remote_client.ts).
func TestSDKTypeScriptRemote(t *testing.T) {
	dir := tsBuild(t)
	runRemoteSDK(t, "boxd-e2e-tsremote", 1, dir, "node", filepath.Join(dir, "dist", "test", "remote_client.js"))
}

// runRemoteSDK starts a boxd (namespace ns) listening on TLS, mints a write token for a
// host user, runs the client program with the remote settings in its
// environment, and checks that it made want sandboxes, each owned by the
// token's user, and never printed the token.
func runRemoteSDK(t *testing.T, ns string, want int, dir, prog string, args ...string) {
	sockGroup, adminGroup, ua, _, _ := hostUsers(t)
	ca := newTestCA(t, t.TempDir())
	port := fmt.Sprint(freePort(t))
	d := startBoxd(t, ns, true, "--socket-group", sockGroup, "--admin-group", adminGroup,
		"--listen", "tcp://127.0.0.1:"+port, "--tls-cert", ca.certFile, "--tls-key", ca.keyFile)
	out, stderr, code := d.boxctl("token", "create", "sdk", "--owner", ua.name, "--scope", "write")
	if code != 0 || !strings.HasPrefix(out, "boxd_") {
		t.Fatalf("token create: %d %q %s", code, out, stderr)
	}
	token := strings.TrimSpace(out)

	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, prog, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"BOXD_SOCKET="+filepath.Join(t.TempDir(), "none.sock"),
		"BOXD_HOST=https://127.0.0.1:"+port, "BOXD_TOKEN="+token, "BOXD_TLS_CA="+ca.caFile,
		"PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	res, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", prog, res)
	var ids []string
	for _, line := range strings.Split(string(res), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "sandbox" {
			ids = append(ids, f[1])
		}
	}
	for _, id := range ids {
		t.Cleanup(func() { _, _, _ = d.boxctl("rm", "-f", id) })
	}
	if err != nil || !strings.HasSuffix(string(res), "OK\n") {
		t.Fatalf("remote client: %v", err)
	}
	if strings.Contains(string(res), token) {
		t.Errorf("the token appears in the client's output")
	}
	if len(ids) != want {
		t.Fatalf("sandboxes made: %q, want %d", ids, want)
	}
	for _, id := range ids {
		got, err := d.api.GetSandbox(d.c, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: id}))
		if err != nil {
			t.Fatalf("get %s on the admin socket: %v", id, err)
		}
		if got.Msg.Sandbox.OwnerUid != ua.uid {
			t.Errorf("owner of %s: uid %d, want the token's user %s (%d)", id, got.Msg.Sandbox.OwnerUid, ua.name, ua.uid)
		}
	}
}
