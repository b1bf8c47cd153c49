//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVolumeFiles: boxctl volume ls-files, stat and cat read a volume no
// sandbox mounts read-write, through boxd, never through a symlink the
// volume holds: links to the host's /etc and to / are described, not
// followed, and a FIFO is refused without hanging.
func TestVolumeFiles(t *testing.T) {
	tag := strconv.Itoa(os.Getpid())
	vol := newVolume(t, "files-"+tag)
	// A sandbox plants the volume's contents, hostile ones included.
	out, stderr, code := boxctlRun("create", "--volume", vol.Name+":/v")
	if code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() { boxctlRun("rm", "-f", id) })
	sh(t, id, "mkdir -p /v/d/sub && printf hello >/v/d/greeting && ln -s /etc/passwd /v/passwd-link && "+
		"ln -s /etc /v/etc-link && ln -s / /v/root-link && mkfifo /v/fifo && : >/v/empty")
	if _, stderr, code := boxctlRun("volume", "stat", vol.Name+":/d/greeting"); code == 0 || !strings.Contains(stderr, "failed_precondition") || !strings.Contains(stderr, id) {
		t.Errorf("stat while %s mounts it read-write: exit %d %q, want failed_precondition naming it", id, code, stderr)
	}
	if _, stderr, code := boxctlRun("rm", "-f", id); code != 0 {
		t.Fatalf("rm: %s", stderr)
	}
	// A read-only mount does not stop a read.
	ro := newSandbox(t, "--volume", vol.Name+":/v:ro")

	out, stderr, code = boxctlRun("volume", "ls-files", "--json", vol.Name)
	if code != 0 {
		t.Fatalf("ls-files: %s", stderr)
	}
	var ls struct {
		Entries []struct {
			Path       string `json:"path"`
			Type       string `json:"type"`
			LinkTarget string `json:"link_target"`
			UID        uint32 `json:"uid"`
		}
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		t.Fatalf("ls-files --json: %v: %s", err, out)
	}
	var names []string
	for _, e := range ls.Entries {
		names = append(names, e.Path+":"+strings.ToLower(strings.TrimPrefix(e.Type, "FILE_TYPE_"))+":"+e.LinkTarget+":"+strconv.Itoa(int(e.UID)))
	}
	want := "d:directory::0 empty:regular::0 etc-link:symlink:/etc:0 fifo:fifo::0 passwd-link:symlink:/etc/passwd:0 root-link:symlink:/:0"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("ls-files = %s\nwant       %s", got, want)
	}
	if got := mustOut(t, "volume", "cat", vol.Name+":/d/greeting"); got != "hello" {
		t.Errorf("cat = %q", got)
	}
	if got := mustOut(t, "volume", "cat", vol.Name+":/empty"); got != "" {
		t.Errorf("cat of an empty file = %q", got)
	}
	if got := strings.Fields(mustOut(t, "volume", "stat", vol.Name+":/d/greeting")); !slices.Contains(got, "regular") || got[slices.Index(got, "size:")+1] != "5" {
		t.Errorf("stat:\n%s", got)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	for _, args := range [][]string{
		{"volume", "cat", vol.Name + ":/passwd-link"},
		{"volume", "cat", vol.Name + ":/etc-link/passwd"},
		{"volume", "cat", vol.Name + ":/root-link/etc/shadow"},
		{"volume", "ls-files", vol.Name + ":/etc-link"},
		{"volume", "stat", vol.Name + ":/etc-link/passwd"},
		{"volume", "cat", vol.Name + ":/d"},
		{"volume", "cat", vol.Name + ":/../etc/passwd"},
		{"volume", "cat", vol.Name + ":/d/../d/greeting"},
	} {
		out, stderr, code := boxctlRun(args...)
		if code == 0 || !strings.Contains(stderr, "invalid_argument") || !strings.Contains(stderr, "path") {
			t.Errorf("%v: exit %d %q, want invalid_argument naming path", args, code, stderr)
		}
		if len(out) > 0 && strings.Contains(string(passwd), strings.TrimSpace(out)) {
			t.Errorf("%v printed the host's file: %q", args, out)
		}
	}
	// A FIFO is refused at once (an open for reading would wait for a
	// writer that never comes).
	t0 := time.Now()
	if _, stderr, code := boxctlRun("volume", "cat", vol.Name+":/fifo"); code == 0 || !strings.Contains(stderr, "invalid_argument") {
		t.Errorf("cat of a FIFO: exit %d %q", code, stderr)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("cat of a FIFO took %s", d)
	}
	if _, stderr, code := boxctlRun("volume", "stat", vol.Name+":/nosuch"); code == 0 || !strings.Contains(stderr, "not_found") {
		t.Errorf("stat of a missing path: exit %d %q", code, stderr)
	}
	// What the read-only sandbox sees is what the file API read.
	if got := sh(t, ro, "cat /v/d/greeting"); got != "hello" {
		t.Errorf("the sandbox reads %q", got)
	}
}
