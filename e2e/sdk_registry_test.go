//go:build linux

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestSDKRegistry pulls and pushes through the Python SDK (sync and
// asyncio) and the TypeScript SDK against a real registry: Debian's
// docker-registry on loopback with TLS from a test CA and basic auth
// (startRegistry, as TestRegistry), and a boxd of its own that trusts that
// CA. The clients are sdk/python/tests/registry_client.py and
// sdk/typescript/test/registry_client.ts; each ends with OK.
func TestSDKRegistry(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	host := startRegistry(t, filepath.Join(dir, "registry"), ca)
	d := startBoxd(t, namespace+"-sdkreg", true, "--registry-ca", ca.caFile, "--registry-timeout", registryTimeout.String())
	clientEnv := append(os.Environ(), "BOXD_SOCKET="+d.sock, "BOXD_TEST_IMAGE="+testImage, "REGISTRY_HOST="+host,
		"REGISTRY_USER="+registryUser, "REGISTRY_PASSWORD="+registryPassword, "PYTHONDONTWRITEBYTECODE=1")
	run := func(t *testing.T, dir string, name string, args ...string) {
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(c, name, args...)
		cmd.Dir = dir
		cmd.Env = clientEnv
		out, err := cmd.CombinedOutput()
		t.Logf("%s:\n%s", name, out)
		if err != nil || !strings.HasSuffix(string(out), "OK\n") {
			t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
		}
	}
	t.Run("Python", func(t *testing.T) {
		run(t, filepath.Join(testenv.RepoRoot(), "sdk", "python", "tests"), python, "registry_client.py")
	})
	t.Run("TypeScript", func(t *testing.T) {
		dir := tsBuild(t)
		run(t, dir, "node", filepath.Join(dir, "dist", "test", "registry_client.js"))
	})
}
