package rpc

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingWriter records writes and flushes, as the real writer would see
// them; it is safe for the timer's goroutine.
type countingWriter struct {
	mu      sync.Mutex
	header  http.Header
	body    strings.Builder
	flushed int // bytes of body flushed so far
	flushes int
}

func (c *countingWriter) Header() http.Header { return c.header }
func (c *countingWriter) WriteHeader(int)     {}
func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.body.Write(p)
}
func (c *countingWriter) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushes++
	c.flushed = c.body.Len()
}
func (c *countingWriter) state() (flushes, flushed, written int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushes, c.flushed, c.body.Len()
}

func serveWith(t *testing.T, path string, h http.HandlerFunc) *countingWriter {
	t.Helper()
	cw := &countingWriter{header: http.Header{}}
	coalesceBulk(h).ServeHTTP(cw, httptest.NewRequest(http.MethodPost, path, nil))
	return cw
}

func TestCoalesceBulkBatchesFlushes(t *testing.T) {
	msg := strings.Repeat("m", 300)
	cw := serveWith(t, "/boxd.v1.FileService/DownloadFiles", func(w http.ResponseWriter, r *http.Request) {
		for range 3000 { // 1,000 small files: start, data, done
			w.Write([]byte(msg))
			w.(http.Flusher).Flush()
		}
	})
	flushes, flushed, written := cw.state()
	if written != 3000*len(msg) || flushed != written {
		t.Fatalf("wrote %d bytes, flushed %d of them, want all %d", written, flushed, 3000*len(msg))
	}
	// 900 KB: a few threshold flushes, maybe some by the timer, and the
	// last one; never one per message.
	if flushes > 50 {
		t.Errorf("%d flushes for 3,000 messages", flushes)
	}
}

func TestCoalesceBulkFlushesAWaitingStream(t *testing.T) {
	got := make(chan int, 1)
	var under *countingWriter
	cw := serveWith(t, "/boxd.v1.FileService/ListDir", func(w http.ResponseWriter, r *http.Request) {
		under = w.(*coalescingWriter).ResponseWriter.(*countingWriter)
		w.Write([]byte("entries"))
		w.(http.Flusher).Flush()
		// The stream now waits (a slow file): what it sent must go out
		// by the timer, not at the end.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, flushed, _ := under.state(); flushed == len("entries") {
				got <- flushed
				return
			}
			time.Sleep(time.Millisecond)
		}
		got <- -1
	})
	if n := <-got; n != len("entries") {
		t.Fatal("a message stayed unflushed while the stream waited")
	}
	if flushes, _, _ := cw.state(); flushes != 1 {
		t.Errorf("%d flushes, want 1 (the timer's)", flushes)
	}
}

func TestCoalesceBulkLeavesOtherStreamsAlone(t *testing.T) {
	cw := serveWith(t, "/boxd.v1.ProcessService/Exec", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(*coalescingWriter); ok {
			t.Error("an interactive stream was wrapped")
		}
		for range 10 {
			w.Write([]byte("out"))
			w.(http.Flusher).Flush()
		}
	})
	if flushes, _, _ := cw.state(); flushes != 10 {
		t.Errorf("%d flushes for 10 messages of an interactive stream, want 10", flushes)
	}
}

// Once the handler has returned, a pending timer must not touch the
// response (the server owns it again).
func TestCoalesceBulkTimerStopsAtFinish(t *testing.T) {
	cw := serveWith(t, "/boxd.v1.FileService/ReadFile", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("x"))
		w.(http.Flusher).Flush() // arms the timer
	})
	flushes, flushed, _ := cw.state()
	if flushes != 1 || flushed != 1 {
		t.Fatalf("after the handler: %d flushes, %d bytes flushed; want the final 1 and 1", flushes, flushed)
	}
	time.Sleep(3 * coalesceDelay)
	if f, _, _ := cw.state(); f != 1 {
		t.Errorf("the timer flushed after the handler returned (%d flushes)", f)
	}
}
