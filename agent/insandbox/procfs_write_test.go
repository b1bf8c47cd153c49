//go:build linux

package insandbox

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

// TestWriteIntoProcfsIsPermissionDenied: procfs refuses a new name with
// ENOENT, so a write there (whose temporary file is a new name) said "no
// such file or directory" of a directory that is there. It is permission
// denied. The name is new, so nothing of the host's /proc/sys is changed.
func TestWriteIntoProcfsIsPermissionDenied(t *testing.T) {
	tg := startServer(t)
	ctx := testCtx(t)
	p := "/proc/sys/kernel/boxd-test-no-such-name"
	_, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: p}, strings.NewReader("x"))
	if !errdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), p) {
		t.Errorf("write %s: %v, want permission denied naming the path", p, err)
	}
}
