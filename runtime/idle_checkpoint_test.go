//go:build linux

package runtime

import (
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// TestResolveIdleCheckpoint: on_idle checkpoint implies auto-resume, and
// an asked-for one that the sandbox could not take is refused naming the
// field; the daemon's default checkpoint is not refused (checkIdle pauses
// what it cannot checkpoint).
func TestResolveIdleCheckpoint(t *testing.T) {
	m := &Manager{cfg: Config{IdleTimeout: time.Hour, OnIdle: IdlePause}}
	var r resolved
	if err := m.resolveIdle(CreateRequest{OnIdle: "checkpoint"}, &r); err != nil || r.idle.Action != IdleCheckpoint || !r.autoResume {
		t.Fatalf("checkpoint: %+v auto-resume %v: %v", r.idle, r.autoResume, err)
	}
	if err := m.resolveIdle(CreateRequest{OnIdle: "checkpoint", IdleTimeout: "0"}, &r); err != nil || r.autoResume {
		t.Errorf("no idle timeout: no idle checkpoint, no implied auto-resume: %+v %v", r, err)
	}
	if err := m.resolveIdle(CreateRequest{AutoResume: true}, &r); err != nil || !r.autoResume || r.idle.Action != IdlePause {
		t.Errorf("auto-resume alone: %+v %v", r, err)
	}
	req := CreateRequest{OnIdle: "checkpoint"}
	ok := resolved{idle: idlePolicy{time.Minute, IdleCheckpoint}, runtime: RuntimeGvisor, limits: Limits{MemoryBytes: 1 << 28, DiskBytes: 1 << 28}}
	if err := checkIdleCheckpoint(req, ok); err != nil {
		t.Errorf("gvisor with limits: %v", err)
	}
	runc := ok
	runc.runtime = RuntimeRunc
	if err := checkIdleCheckpoint(req, runc); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("runc: %v, want failed_precondition", err)
	}
	noDisk := ok
	noDisk.limits.DiskBytes = 0
	var fe *FieldError
	if err := checkIdleCheckpoint(req, noDisk); err == nil || !asFieldErr(err, &fe) || fe.Field != "on_idle" {
		t.Errorf("no disk cap: %v, want a field error naming on_idle", err)
	}
	if err := checkIdleCheckpoint(CreateRequest{}, runc); err != nil {
		t.Errorf("the daemon's default checkpoint on runc: %v", err)
	}
}
