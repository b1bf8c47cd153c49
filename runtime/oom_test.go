//go:build linux

package runtime

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseOOMKills(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3, true},               // v1 memory.oom_control
		{"low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n", 2, true}, // v2 memory.events
		{"oom_kill_disable 0\nunder_oom 0\n", 0, false},                          // a kernel before 4.13
		{"oom_kill x\n", 0, false},
	} {
		got, ok := parseOOMKills([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseOOMKills(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// openFiles keeps one file per id, opens anew when asked, and closes what
// it drops or forgets.
func TestOpenFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("a"), 0o600)
	os.WriteFile(b, []byte("b"), 0o600)
	var o openFiles
	f1, err := o.open("x", func() string { return a }, false)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := o.open("x", func() string { return b }, false); f != f1 {
		t.Fatal("a second open did not return the kept file")
	}
	f2, err := o.open("x", func() string { return b }, true)
	if err != nil || f2 == f1 {
		t.Fatalf("a fresh open kept the old file: %v", err)
	}
	if _, err := f1.Stat(); err == nil {
		t.Error("the replaced file is still open")
	}
	o.drop("x", f1) // not x's file any more: no effect
	if _, err := f2.Stat(); err != nil {
		t.Errorf("drop of a replaced file closed the current one: %v", err)
	}
	o.forget("x")
	if _, err := f2.Stat(); err == nil || len(o.files) != 0 {
		t.Errorf("forget left the file open (%d kept)", len(o.files))
	}
	if _, err := o.open("y", func() string { return filepath.Join(dir, "missing") }, false); err == nil || len(o.files) != 0 {
		t.Errorf("open of a missing file: %v, %d kept", err, len(o.files))
	}
}
