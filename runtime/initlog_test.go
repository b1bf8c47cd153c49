//go:build linux

package runtime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A log past its maximum is cut to its tail in place, so a writer that
// holds it open for appending (the shim) keeps writing into the same,
// bounded file.
func TestTrimLogKeepsTailInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "init.log")
	shim, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer shim.Close()
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(shim, "line %06d %s\n", i, strings.Repeat("x", 40))
	}
	if err := trimLog(path, 64<<10, 4<<10); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(shim, "after the trim\n")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 5<<10 {
		t.Fatalf("trimmed log is %d bytes, want about 4 KiB", len(b))
	}
	if !strings.HasPrefix(string(b), "[boxd: log trimmed from ") {
		t.Errorf("trimmed log does not say so: %.80q", b)
	}
	if !bytes.Contains(b, []byte("\nline 019999 ")) || !bytes.HasSuffix(b, []byte("after the trim\n")) {
		t.Errorf("tail or later append missing:\n%s", b[max(len(b)-300, 0):])
	}
	// Whole lines only after the note.
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.HasPrefix(l, "line ") || len(l) != len("line 000000 ")+40 {
			t.Fatalf("cut line %q in the kept tail", l)
		}
	}
	// A small log is left alone.
	before, _ := os.ReadFile(path)
	if err := trimLog(path, 64<<10, 4<<10); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a log under the maximum was changed")
	}
}

// A failed start quotes the end of the log without reading the rest, and
// neither reading nor trimming follows a symlink put in the log's place.
func TestReadLogTailReadsOnlyTheEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "init.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// 64 GiB, sparse: reading it whole would take minutes and the memory.
	if err := f.Truncate(64 << 30); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("the end\n"), 64<<30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tail, err := readLogTail(path, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if len(tail) != 1024 || !bytes.HasSuffix(tail, []byte("the end\n")) {
		t.Fatalf("tail is %d bytes ending %q", len(tail), tail[max(len(tail)-10, 0):])
	}

	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, bytes.Repeat([]byte("p"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := readLogTail(link, 10); err == nil {
		t.Error("readLogTail followed a symlink")
	}
	if err := trimLog(link, 10, 5); err == nil {
		t.Error("trimLog followed a symlink without an error")
	}
	if st, _ := os.Stat(target); st.Size() != 1<<20 {
		t.Errorf("the symlink's target was changed: %d bytes", st.Size())
	}
}
