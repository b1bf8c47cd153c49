//go:build linux

package insandbox

import (
	"io"
	"os"
	"testing"
	"time"
)

// A reader that falls behind (a loaded machine, a slow host) must get
// everything the command wrote before it exited: awaitDrain may not give
// up while the pipe still holds bytes, only once it has been empty for
// exitGrace.
func TestAwaitDrainWaitsForSlowReader(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	payload := make([]byte, 48<<10) // fits in the pipe: the writer exits at once
	if _, err := w.Write(payload); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	var got int
	go func() {
		defer close(done)
		time.Sleep(3 * exitGrace) // behind
		b, _ := io.ReadAll(r)
		got = len(b)
	}()
	start := time.Now()
	if lost := awaitDrain(done, r); lost {
		t.Fatal("reported lost output")
	}
	// It may return as soon as the reader has taken the last byte, a
	// moment before the reader's goroutine ends: what it must not do is
	// return with bytes still in the pipe.
	if n := buffered(r); n != 0 {
		t.Fatalf("awaitDrain returned after %v with %d bytes still in the pipe", time.Since(start), n)
	}
	<-done
	if got != len(payload) {
		t.Errorf("reader got %d of %d bytes", got, len(payload))
	}
}

// A background process that keeps the write end open but writes nothing
// must not hold the exec: awaitDrain returns after exitGrace.
func TestAwaitDrainGivesUpOnIdlePipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	start := time.Now()
	if lost := awaitDrain(make(chan struct{}), r); lost {
		t.Error("an empty pipe reported lost output")
	}
	if d := time.Since(start); d < exitGrace || d > 20*exitGrace {
		t.Errorf("gave up after %v, want about %v", d, exitGrace)
	}
}
