package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteRotateKeep(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, 400, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 30; i++ {
		if err := l.Write(Entry{Time: time.Now(), UID: 1000, PID: 42, Method: "/boxd.v1.SandboxService/Exec", Sandbox: fmt.Sprintf("sb%02d", i), Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{FileName, FileName + ".1", FileName + ".2"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, st.Mode().Perm())
		}
		if st.Size() > 400 {
			t.Errorf("%s: %d bytes, over the 400 limit", name, st.Size())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".3")); !os.IsNotExist(err) {
		t.Errorf("keep 2 left a third rotated file: %v", err)
	}
	// The live file ends with the last entry, every line is JSON.
	f, _ := os.Open(filepath.Join(dir, FileName))
	defer f.Close()
	var last Entry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
	}
	if last.Sandbox != "sb29" || last.UID != 1000 || last.PID != 42 || last.Result != "ok" {
		t.Errorf("last entry %+v", last)
	}
}

func TestOpenNarrowsMode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, FileName)
	if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after open, want 0600", st.Mode().Perm())
	}
}

func TestOpenBadLimits(t *testing.T) {
	if _, err := Open(t.TempDir(), 0, 1); err == nil {
		t.Error("size 0 accepted")
	}
	if _, err := Open(t.TempDir(), 10, 0); err == nil {
		t.Error("keep 0 accepted")
	}
}

// Entries are written with a hand-made encoder (jsonline); each line must
// be what json.Marshal wrote before, for any entry.
func TestEntryJSONMatchesEncodingJSON(t *testing.T) {
	for _, e := range []Entry{
		{},
		{Time: time.Now().UTC(), UID: -1, Method: "/boxd.v1.SandboxService/Exec", Result: "ok"},
		{Time: time.Now(), UID: 1000, PID: 4242, Method: "/boxd.v1.SandboxService/CreateSandbox", Sandbox: "my<box>\u2028", Result: "invalid_argument",
			Error: "invalid_argument: memory: \"12q\" is not a size \x00\xff & more"},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.appendJSON(nil)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendJSON(%+v) = %s, %v; json.Marshal = %s", e, got, err, want)
		}
	}
	// A year json.Marshal refuses fails as it did.
	if _, err := (&Entry{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}).appendJSON(nil); err == nil {
		t.Error("an entry json.Marshal refuses was encoded")
	}
}
