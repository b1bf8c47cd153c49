//go:build linux

package runtime

import (
	"slices"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/boxd-dev/boxd/oci"
)

// TestCommandEnv: inspect shows the environment commands get, from the
// init's hand-off annotation, without the HOSTNAME boxd adds; a spec of an
// older boxd still shows its env from the init's environment.
func TestCommandEnv(t *testing.T) {
	s := &specs.Spec{
		Process:     &specs.Process{Env: []string{oci.DefaultPathEnv}},
		Annotations: map[string]string{oci.InitAnnotation: `{"workdir":"/w","env":["PATH=/bin","GODEBUG=x=1","HOSTNAME=abc","BOXD_MINE=1"],"pids":9}`},
	}
	if got, want := commandEnv(s), []string{"PATH=/bin", "GODEBUG=x=1", "BOXD_MINE=1"}; !slices.Equal(got, want) {
		t.Errorf("from the annotation: %q, want %q", got, want)
	}
	old := &specs.Spec{Process: &specs.Process{Env: []string{"PATH=/bin", "A=1", "BOXD_WORKDIR=/w", "BOXD_PIDS=9", "HOSTNAME=abc"}}}
	if got, want := commandEnv(old), []string{"PATH=/bin", "A=1"}; !slices.Equal(got, want) {
		t.Errorf("from an older spec: %q, want %q", got, want)
	}
}
