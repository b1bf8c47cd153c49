package volume

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCopySparse: the copy has the source's bytes and its holes.
func TestCopySparse(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 10 << 20, 64<<20 - 4096} {
		if _, err := f.WriteAt(bytes.Repeat([]byte{byte(off>>20) + 1}, 4096), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if err := copySparse(src, dst); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(dst)
	if !bytes.Equal(a, b) {
		t.Fatal("copy differs from its source")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dst, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 1<<20 {
		t.Errorf("copy of 12 KiB of data occupies %d bytes: holes were filled", st.Blocks*512)
	}
	if err := copySparse(src, dst); err == nil {
		t.Error("copy over an existing file succeeded")
	}
}
