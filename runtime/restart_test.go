//go:build linux

package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/boxd-dev/boxd/oci"
)

func TestParseRestartLimit(t *testing.T) {
	for _, tc := range []struct {
		in      string
		limit   int
		window  time.Duration
		wantErr bool
	}{
		{"5/10m", 5, 10 * time.Minute, false},
		{"3/1m", 3, time.Minute, false},
		{"0", 0, DefaultRestartPolicy.Window, false},
		{"off", 0, DefaultRestartPolicy.Window, false},
		{"5", 0, 0, true},
		{"x/1m", 0, 0, true},
		{"-1/1m", 0, 0, true},
		{"101/1m", 0, 0, true},
		{"5/0s", 0, 0, true},
		{"5/soon", 0, 0, true},
	} {
		p, err := ParseRestartLimit(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: err %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && (p.Limit != tc.limit || p.Window != tc.window) {
			t.Errorf("%q = %+v", tc.in, p)
		}
	}
}

// TestRestartAdmit: restarts back off (1s, 2s, ...), stop at the limit with
// a refusal naming when the next is allowed, and resume once the window
// has moved past the oldest.
func TestRestartAdmit(t *testing.T) {
	p := RestartPolicy{Limit: 3, Window: time.Minute, Backoff: time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var st restartState
	step := func(now time.Time, wantWait time.Duration, wantRefusal string) {
		t.Helper()
		wait, refusal := p.admit(&st, now)
		if wait != wantWait || !strings.Contains(refusal, wantRefusal) || (wantRefusal == "" && refusal != "") {
			t.Fatalf("at +%v: wait %v refusal %q, want %v %q", now.Sub(t0), wait, refusal, wantWait, wantRefusal)
		}
		if wait == 0 && refusal == "" {
			st.Recent = append(st.Recent, now)
		}
	}
	step(t0, 0, "")                                              // first restart: at once
	step(t0.Add(500*time.Millisecond), 500*time.Millisecond, "") // 1s after it
	step(t0.Add(time.Second), 0, "")
	step(t0.Add(2*time.Second), time.Second, "") // 2s after the second
	step(t0.Add(3*time.Second), 0, "")
	step(t0.Add(10*time.Second), 0, "restart limit reached: 3 restarts within 1m0s; the next is allowed after 2026-01-01T00:01:00Z")
	step(t0.Add(59*time.Second), 0, "restart limit reached")
	step(t0.Add(60500*time.Millisecond), 0, "") // the first left the window
	if len(st.Recent) != 3 {
		t.Errorf("recent = %v", st.Recent)
	}

	off := RestartPolicy{Limit: 0, Window: time.Minute}
	if _, refusal := off.admit(&restartState{}, t0); !strings.Contains(refusal, "disabled") {
		t.Errorf("limit 0: refusal %q", refusal)
	}
}

// TestRootfsPaths: the paths checked are the real sandbox spec's mount
// destinations, the init's binary and workdir; nothing below /dev, /proc or
// /sys (fresh filesystems runc mounts) is checked in the rootfs.
func TestRootfsPaths(t *testing.T) {
	initBin := filepath.Join(t.TempDir(), "boxd-init")
	if err := os.WriteFile(initBin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := oci.Spec(namespaces.WithNamespace(context.Background(), "t"), oci.Config{
		ID: "abc", MemoryBytes: 64 << 20, CPUs: 1, Pids: 10, HostUID: 1000, HostGID: 1000, IDMapSize: 100,
		InitBinary: initBin, ChannelDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range rootfsPaths(s, "/work/dir") {
		got[p.path] = p.file
	}
	want := map[string]bool{
		"/proc": false, "/dev": false, "/sys": false, "/run": false, "/tmp": false,
		"/.boxd/init": true, "/.boxd/run": false, "/work/dir": false,
		"/etc/passwd": true, "/etc/group": true,
	}
	for p, file := range want {
		if f, ok := got[p]; !ok || f != file {
			t.Errorf("%s: checked %v, file %v; want file %v", p, ok, f, file)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected path %s", p)
		}
	}
}

// TestCheckTree: symlinks and wrong file types anywhere on a checked path
// are reported by name; missing components are fine; the walk never
// follows a symlink, even one pointing inside the tree.
func TestCheckTree(t *testing.T) {
	paths := []rootfsPath{{"/.boxd/init", true}, {"/.boxd/run", false}, {"/tmp", false}, {"/workspace", false}, {"/etc/passwd", true}}
	for _, tc := range []struct {
		name  string
		setup func(root string) error
		want  string
	}{
		{"empty rootfs", func(string) error { return nil }, ""},
		{"as runc leaves it", func(r string) error {
			return mkAll(r, ".boxd/run", "tmp", "workspace", func() error { return os.WriteFile(filepath.Join(r, ".boxd/init"), nil, 0o755) })
		}, ""},
		{"/.boxd a symlink", func(r string) error {
			return mkAll(r, "elsewhere", func() error { return os.Symlink("/elsewhere", filepath.Join(r, ".boxd")) })
		}, "/.boxd is a symlink"},
		{"/.boxd a relative symlink", func(r string) error {
			return mkAll(r, "x", func() error { return os.Symlink("x", filepath.Join(r, ".boxd")) })
		}, "/.boxd is a symlink"},
		{"/.boxd/init a symlink", func(r string) error {
			return mkAll(r, ".boxd", func() error { return os.Symlink("/proc/self/fd/7/../../../bin/sh", filepath.Join(r, ".boxd/init")) })
		}, "/.boxd/init is a symlink"},
		{"/.boxd/init a directory", func(r string) error { return mkAll(r, ".boxd/init") }, "/.boxd/init is a directory, not a regular file"},
		{"/.boxd/init a fifo", func(r string) error {
			return mkAll(r, ".boxd", func() error { return syscall.Mkfifo(filepath.Join(r, ".boxd/init"), 0o644) })
		}, "/.boxd/init is a fifo, not a regular file"},
		{"/.boxd a file", func(r string) error { return os.WriteFile(filepath.Join(r, ".boxd"), nil, 0o644) }, "/.boxd is a regular file, not a directory"},
		{"/tmp a symlink", func(r string) error { return os.Symlink("/proc/sys", filepath.Join(r, "tmp")) }, "/tmp is a symlink"},
		{"/workspace a symlink", func(r string) error { return os.Symlink("/proc/sys", filepath.Join(r, "workspace")) }, "/workspace is a symlink"},
		{"/etc/passwd a fifo", func(r string) error {
			return mkAll(r, "etc", func() error { return syscall.Mkfifo(filepath.Join(r, "etc/passwd"), 0o644) })
		}, "/etc/passwd is a fifo, not a regular file"},
		{"/etc a symlink", func(r string) error { return os.Symlink("/proc/self", filepath.Join(r, "etc")) }, "/etc is a symlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := tc.setup(root); err != nil {
				t.Fatal(err)
			}
			got, err := checkTree(root, paths)
			if err != nil || got != tc.want {
				t.Errorf("checkTree = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// mkAll creates directories under root, then runs the functions given.
func mkAll(root string, args ...any) error {
	for _, a := range args {
		switch v := a.(type) {
		case string:
			if err := os.MkdirAll(filepath.Join(root, v), 0o755); err != nil {
				return err
			}
		case func() error:
			if err := v(); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestExitReason(t *testing.T) {
	if got := exitReason(143); got != "init exited with status 143 (SIGTERM)" {
		t.Errorf("143: %q", got)
	}
	if got := exitReason(2); got != "init exited with status 2" {
		t.Errorf("2: %q", got)
	}
}
