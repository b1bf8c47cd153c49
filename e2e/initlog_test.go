//go:build linux

package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// The init's log is a file on the host's disk that the shim writes outside
// every limit of the sandbox. Failing calls each add a line to it; it must
// stay bounded however many there are, and boxd trims what is there anyway
// (here: a megabyte put in it from outside, as a flood from an earlier init
// would leave it).
func TestInitLogIsBounded(t *testing.T) {
	id := newSandbox(t)
	c := ctx(t)
	api := filesAPI()
	logPath := filepath.Join(env.stateDir, "sandboxes", id, "init.log")
	for i := 0; i < 1500; i++ {
		_, err := api.StatFile(c, connect.NewRequest(&boxdv1.StatFileRequest{SandboxId: id, Path: "/no/such/file/" + strings.Repeat("x", 40)}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("stat %d: %v, want not_found", i, err)
		}
	}
	st, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// 1,500 lines of ~120 bytes would be 180 KB; the init's budget is 64 KiB.
	if st.Size() > 66<<10 {
		t.Fatalf("init.log grew to %d bytes after 1,500 failing calls", st.Size())
	}
	b, _ := os.ReadFile(logPath)
	if !bytes.Contains(b, []byte("log budget")) {
		t.Fatalf("init.log (%d bytes) does not say its budget ran out; tail: %q", len(b), b[max(len(b)-300, 0):])
	}

	// Whatever grew the file, the reconcile pass (every 300 ms here) cuts
	// it to its tail in place.
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(bytes.Repeat([]byte("flood line from an earlier init\n"), 32<<10))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.Stat(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() <= 17<<10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("init.log still %d bytes 10 s after it passed the maximum", st.Size())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The sandbox still works and the log still takes lines.
	if out := sh(t, id, "echo alive"); out != "alive\n" {
		t.Fatalf("exec after the trim printed %q", out)
	}
}
