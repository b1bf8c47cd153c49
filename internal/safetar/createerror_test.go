//go:build linux

package safetar

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreateError: ENOENT creating a name in a procfs directory is EACCES;
// in a directory removed meanwhile it stays ENOENT.
func TestCreateError(t *testing.T) {
	try := func(dir string) error {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if dir != "/proc/sys/kernel" {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		}
		_, err = unix.Openat(fd, ".boxd-test", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		return CreateError(fd, err)
	}
	if err := try("/proc/sys/kernel"); err != unix.EACCES {
		t.Errorf("in /proc/sys/kernel: %v, want EACCES", err)
	}
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := try(gone); err != unix.ENOENT {
		t.Errorf("in a removed directory: %v, want ENOENT", err)
	}
}
