//go:build linux

package insandbox

import (
	"bytes"
	"crypto/rand"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// TestCheckpointPrepareResume: checkpoint-prepare closes the init's
// listener, removes its socket file and every agent connection, and keeps
// the init running without a channel; SIGUSR2 binds a new socket, which
// proves the secret (checkpoint-resume) and serves as before. An init that
// cannot bind anew refuses to prepare.
func TestCheckpointPrepareResume(t *testing.T) {
	tg := startInit(t, "BOXD_TEST_REBIND=1")
	ctx := testCtx(t)
	secret := make([]byte, wire.CheckpointSecretSize)
	rand.Read(secret)
	if err := tg.client.CheckpointPrepare(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tg.socket); !os.IsNotExist(err) {
		t.Fatalf("the agent socket's file is still there after prepare (%v)", err)
	}
	time.Sleep(100 * time.Millisecond)
	if processGone(tg.init.Process.Pid) {
		t.Fatal("the init exited without its listener")
	}
	if err := tg.init.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(tg.socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new agent socket after SIGUSR2")
		}
	}
	nonce := make([]byte, wire.CheckpointSecretSize)
	rand.Read(nonce)
	var mac []byte
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if mac, err = tg.client.CheckpointResume(ctx, nonce); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !bytes.Equal(mac, wire.CheckpointMAC(secret, nonce)) {
		t.Fatalf("resume: %x %v, want the MAC of the secret", mac, err)
	}
	if r, err := tg.client.Exec(ctx, wire.ExecRequest{Args: []string{"true"}}, nil, nil, nil); err != nil || r.ExitCode != 0 {
		t.Errorf("exec after the rebind: %+v %v", r, err)
	}

	plain := startInit(t)
	if err := plain.client.CheckpointPrepare(ctx, secret); err == nil {
		t.Error("an init without Rebind prepared for a checkpoint")
	}
	if err := plain.client.Ping(ctx); err != nil {
		t.Errorf("the refusing init lost its channel: %v", err)
	}
}
