//go:build linux

package rpc

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServerImportsNoClient: the server is built on what both ends share
// (rpc/apiwire), never on a client of its own API, so the two sides can
// change apart and the daemon links no client code.
func TestServerImportsNoClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/boxd-dev/boxd/rpc/client", "github.com/boxd-dev/boxd/internal/rpcclient", "github.com/boxd-dev/boxd/sdk/go/boxd", "github.com/boxd-dev/boxd/rpc/lite":
			t.Errorf("package rpc depends on the client package %s", dep)
		}
	}
	if !strings.Contains(string(out), "github.com/boxd-dev/boxd/rpc/apiwire\n") {
		t.Error("package rpc does not use rpc/apiwire, the settings both ends share")
	}
}
