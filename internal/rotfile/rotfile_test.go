package rotfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// lines reads every line of the files named, oldest file first.
func lines(t *testing.T, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		f, err := os.Open(n)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			out = append(out, sc.Text())
		}
		f.Close()
	}
	return out
}

func TestRotateKeep(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	w, err := Open(p, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 30 {
		if err := w.Write(fmt.Appendf(nil, "line %02d\n", i)); err != nil { // 8 bytes
			t.Fatal(err)
		}
	}
	// 12 lines (96 bytes) per file: 6 in the live file, 12 in each of .1, .2.
	for _, n := range []string{p, p + ".1", p + ".2"} {
		st, err := os.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 || st.Size() > 100 {
			t.Errorf("%s: mode %v, %d bytes", n, st.Mode().Perm(), st.Size())
		}
	}
	if _, err := os.Stat(p + ".3"); !os.IsNotExist(err) {
		t.Errorf("keep 2 left a third rotated file: %v", err)
	}
	got := lines(t, p+".2", p+".1", p)
	if len(got) != 30 || got[0] != "line 00" || got[29] != "line 29" {
		t.Errorf("lines in order: %d, %q .. %q", len(got), got[0], got[len(got)-1])
	}
}

// A line longer than the limit goes into the file it finds empty; only the
// next write rotates, so no empty file is rotated over a full one.
func TestOversizedLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	w, err := Open(p, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	long := strings.Repeat("a", 20) + "\n"
	for _, l := range []string{long, "b\n"} {
		if err := w.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if got := lines(t, p+".1"); len(got) != 1 || got[0] != long[:20] {
		t.Errorf(".1 = %q", got)
	}
	if got := lines(t, p); len(got) != 1 || got[0] != "b" {
		t.Errorf("live = %q", got)
	}
}

// Reopening appends to what is there and counts it towards the limit.
func TestReopenAppends(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(p, []byte("old1\nold2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Open(p, 12, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after open, want 0600", st.Mode().Perm())
	}
	if err := w.Write([]byte("new\n")); err != nil { // 10+4 > 12: rotates
		t.Fatal(err)
	}
	w.Close()
	if got := lines(t, p+".1", p); strings.Join(got, ",") != "old1,old2,new" {
		t.Errorf("lines %q", got)
	}
	if got := lines(t, p); len(got) != 1 {
		t.Errorf("live file %q, want the new line alone", got)
	}
}

func TestBadLimits(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	if _, err := Open(p, 0, 1); err == nil {
		t.Error("size 0 accepted")
	}
	if _, err := Open(p, 10, 0); err == nil {
		t.Error("keep 0 accepted")
	}
}

// A rotation that fails (here NAME.1 is a directory the file cannot be
// renamed over) is reported, the line still lands in the live file, and
// the next write rotates once the obstacle is gone.
func TestRotateFailureKeepsLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	if err := os.MkdirAll(filepath.Join(p+".1", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := Open(p, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]byte("two\n")); err == nil || !strings.Contains(err.Error(), "rotate") {
		t.Fatalf("write over a failed rotation: %v", err)
	}
	if got := lines(t, p); strings.Join(got, ",") != "one,two" {
		t.Fatalf("live %q", got)
	}
	if err := os.RemoveAll(p + ".1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]byte("three\n")); err != nil {
		t.Fatal(err)
	}
	if a, b := lines(t, p+".1"), lines(t, p); strings.Join(a, ",") != "one,two" || strings.Join(b, ",") != "three" {
		t.Errorf(".1 %q, live %q", a, b)
	}
}

// Concurrent writers never split or lose a line.
func TestConcurrentWrites(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.log")
	w, err := Open(p, 4096, 50)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if err := w.Write(fmt.Appendf(nil, "g%d-%03d\n", g, i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	w.Close()
	names := []string{p}
	for i := 1; i <= 50; i++ {
		names = append(names, fmt.Sprintf("%s.%d", p, i))
	}
	got := lines(t, names...)
	seen := map[string]bool{}
	for _, l := range got {
		if len(l) != 6 || seen[l] {
			t.Fatalf("split or repeated line %q", l)
		}
		seen[l] = true
	}
	if len(seen) != 1600 {
		t.Errorf("%d lines, want 1600", len(seen))
	}
}

func TestWriteAfterClose(t *testing.T) {
	w, err := Open(filepath.Join(t.TempDir(), "x.log"), 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := w.Write([]byte("x\n")); err == nil {
		t.Error("write after close accepted")
	}
}

// TestReserveOnFullDisk: lines written within what Reserve allocated go
// to disk even once the filesystem is full, and Reserve itself then
// fails, so a caller can refuse to act unlogged. A 1 MiB tmpfs is the
// disk.
func TestReserveOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	w, err := Open(filepath.Join(dir, "log"), 1<<30, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Reserve(64 << 10); err != nil {
		t.Fatal(err)
	}
	// Fill the rest of the filesystem.
	fill, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := fill.Write(chunk); err != nil {
			break
		}
	}
	fill.Close()
	line := append(bytes.Repeat([]byte("x"), 1023), '\n')
	for i := range 64 {
		if err := w.Write(line); err != nil {
			t.Fatalf("line %d within the reservation: %v", i, err)
		}
	}
	if err := w.Reserve(reserveChunk * 2); !errors.Is(err, unix.ENOSPC) {
		t.Errorf("Reserve on a full disk: %v, want ENOSPC", err)
	}
	// Without a reservation the same write fails: the test's disk is full.
	w2, err := Open(filepath.Join(dir, "other"), 1<<30, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if err := w2.Write(line); err == nil {
		t.Error("a write without a reservation succeeded on the full disk")
	}
}
