package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/gvisor"
)

// TestPickRuntime: an unknown runtime is invalid_argument naming the
// field; gvisor without runsc is failed_precondition saying why; the
// daemon's default applies to a request that names none.
func TestPickRuntime(t *testing.T) {
	m := &Manager{cfg: Config{GvisorErr: "gVisor is not installed: stat /opt/x/runsc: no such file"}}
	_, err := m.pickRuntime("kata")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "runtime" || !errdefs.IsInvalidArgument(err) {
		t.Errorf("kata: %v, want invalid_argument on field runtime", err)
	}
	_, err = m.pickRuntime("gvisor")
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "/opt/x/runsc") {
		t.Errorf("gvisor missing: %v, want failed_precondition naming why", err)
	}
	if got, err := m.pickRuntime(""); got != RuntimeRunc || err != nil {
		t.Errorf("default: %q %v, want runc", got, err)
	}
	m.cfg.Gvisor = &Gvisor{Info: gvisor.Info{Version: "v1"}}
	m.cfg.DefaultRuntime = RuntimeGvisor
	if got, err := m.pickRuntime(""); got != RuntimeGvisor || err != nil {
		t.Errorf("default gvisor: %q %v", got, err)
	}
	if got, err := m.pickRuntime("runc"); got != RuntimeRunc || err != nil {
		t.Errorf("runc over a gvisor default: %q %v", got, err)
	}
	// A build's steps are commits, which gVisor does not offer: refused
	// up front, not run under runc behind the default's back.
	if _, err := m.Build(context.Background(), BuildRequest{Ref: "x:1", Dockerfile: []byte("FROM scratch\n")}, nil); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "default-runtime") {
		t.Errorf("build under a gvisor default: %v, want failed_precondition naming --default-runtime", err)
	}
	rec := m.withRuntime(record{Runtime: RuntimeGvisor})
	if rec.Runtime != "gvisor" || rec.RuntimeVersion != "v1" {
		t.Errorf("gvisor record %+v", rec)
	}
	if rec := m.withRuntime(record{}); rec.Runtime != "runc" {
		t.Errorf("empty runtime recorded as %q, want runc", rec.Runtime)
	}
}
