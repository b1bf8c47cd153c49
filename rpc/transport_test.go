package rpc

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestListen(t *testing.T) {
	base := t.TempDir()
	// A directory Listen creates is 0750; the socket is 0660.
	path := filepath.Join(base, "new", "boxd.sock")
	ln, err := Listen(path, -1)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o750 {
		t.Errorf("created dir mode %o, want 750", st.Mode().Perm())
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %o, want 660", st.Mode().Perm())
	}
	// A second daemon on a live socket is refused.
	if _, err := Listen(path, -1); err == nil {
		t.Error("Listen on a live socket succeeded")
	}
	ln.Close()

	// An existing directory keeps its mode (it may be /tmp).
	shared := filepath.Join(base, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky)
	ln, err = Listen(filepath.Join(shared, "b.sock"), -1)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if st, _ := os.Stat(shared); st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("existing dir mode changed to %v", st.Mode())
	}

	// A stale socket file from a dead daemon is replaced.
	stale := filepath.Join(base, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	ln, err = Listen(stale, -1)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln.Close()
}
