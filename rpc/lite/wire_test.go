//go:build linux

package lite

import (
	"io"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// TestWireConstants: this package repeats a few of the API's wire
// settings (importing apiwire would put net/http and connect into the
// front binary); they must stay what the server and the full client use.
func TestWireConstants(t *testing.T) {
	if Path != boxdv1connect.SandboxServiceExecStreamProcedure {
		t.Errorf("Path %q, the API's ExecStream is %q", Path, boxdv1connect.SandboxServiceExecStreamProcedure)
	}
	if MaxMessageBytes != apiwire.MaxMessageBytes {
		t.Errorf("MaxMessageBytes %d, apiwire's %d", MaxMessageBytes, apiwire.MaxMessageBytes)
	}
	if got := lostErr(io.ErrUnexpectedEOF).Error(); !strings.HasPrefix(got, "unavailable: "+apiwire.LostConnection+": ") {
		t.Errorf("a lost connection reads %q, want it to begin as apiwire.LostConnection", got)
	}
}
