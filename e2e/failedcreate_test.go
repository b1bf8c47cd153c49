//go:build linux

package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/boxd-dev/boxd/internal/safetar"
	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/runtime"
	"github.com/boxd-dev/boxd/snapshot"
)

// TestFailedCreateLeavesNothing drives runtime.Manager with an init that
// dies at once, so create fails after the container, snapshot, task and
// state directory exist: all of them must be gone afterwards.
func TestFailedCreateLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	badInit := filepath.Join(dir, "bad-init")
	// The pause before exiting: under load the shim (not boxd) was seen to
	// drop the output of an init that exits the instant it starts, and the
	// log is what this test reads back.
	must(t, os.WriteFile(badInit, []byte("#!/bin/sh\necho failing on purpose >&2\nsleep 0.3\nexit 7\n"), 0o755)) // not exit 3: that is the init's unknown-user code
	stateDir := filepath.Join(dir, "state")
	// A namespace of its own: the test daemon's reconciler must not see
	// this manager's half-made sandboxes.
	const ns = namespace + "-failed"
	c := namespaces.WithNamespace(ctx(t), ns)
	images := snapshot.New(env.ctr, "overlayfs")
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(safetar.WriteRootfs(pw, env.busybox)) }()
	if _, err := images.ImportRootfs(c, pr, testImage, snapshot.WriteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	m, err := runtime.NewManager(runtime.Config{
		Client: env.ctr, Images: images, StateDir: stateDir, InitBinary: badInit,
		Namespace: ns, Runc: testenv.Runc, DefaultImage: testImage, ReadyTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	before := inventory(t, c)
	_, err = m.Create(c, runtime.CreateRequest{Memory: "64m"})
	if err == nil || !strings.Contains(err.Error(), "init exited") {
		t.Fatalf("create with a dying init = %v, want an error saying the init exited", err)
	}
	if !strings.Contains(err.Error(), "failing on purpose") {
		t.Errorf("error %v does not quote the init log", err)
	}
	if after := inventory(t, c); after != before {
		t.Errorf("failed create left things behind:\nbefore %s\nafter  %s", before, after)
	}
	entries, _ := os.ReadDir(filepath.Join(stateDir, "sandboxes"))
	if len(entries) != 0 {
		t.Errorf("state dir entries left: %v", entries)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), stateDir) {
		t.Errorf("mounts under %s left", stateDir)
	}
}

// inventory summarises containers and active snapshots in the namespace.
func inventory(t *testing.T, c context.Context) string {
	t.Helper()
	ctrs, err := env.ctr.Containers(c)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ctr := range ctrs {
		ids = append(ids, ctr.ID())
	}
	var active []string
	err = env.ctr.SnapshotService("overlayfs").Walk(c, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindActive {
			active = append(active, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return "containers " + strings.Join(ids, ",") + " active snapshots " + strings.Join(active, ",")
}
