package rpc

import (
	"net/http"
	"sync"
	"time"
)

// Bulk server streams (many files' start, data and done messages; a
// listing's entries) send many small messages back to back, and connect-go
// flushes the response after every one of them. Under Go's HTTP/2 server a
// flush is a round trip to the connection's serving goroutine and a frame
// write of its own, so a download of 1,000 small files cost 3,000 of them.
// For these procedures the flushes are coalesced: data goes out once
// coalesceBytes have gathered, or coalesceDelay after the first unflushed
// message if no more come (a stream that waits on a slow file does not hold
// back what it already has), and when the call ends. Interactive streams
// (exec output, watches, process output) are not wrapped: each of their
// messages goes out at once.

const (
	coalesceBytes = 256 << 10
	coalesceDelay = 2 * time.Millisecond
)

// bulkProcedures are the server streams whose flushes are coalesced.
var bulkProcedures = map[string]bool{
	"/boxd.v1.FileService/DownloadFiles": true,
	"/boxd.v1.FileService/ListDir":       true,
	"/boxd.v1.FileService/ReadFile":      true,
}

// coalesceBulk wraps h so that the bulk procedures' responses are flushed
// in batches.
func coalesceBulk(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok || !bulkProcedures[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		cw := &coalescingWriter{ResponseWriter: w, flusher: f}
		defer cw.finish()
		h.ServeHTTP(cw, r)
	})
}

// coalescingWriter defers Flush as described above. Write and Flush are
// serialised with the timer's flush by mu; once the handler has returned
// (finish) the timer does nothing.
type coalescingWriter struct {
	http.ResponseWriter
	flusher http.Flusher

	mu      sync.Mutex
	pending int // bytes written since the last real flush
	timer   *time.Timer
	armed   bool
	done    bool
}

func (w *coalescingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.ResponseWriter.Write(p)
	w.pending += n
	return n, err
}

func (w *coalescingWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *coalescingWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
	case w.pending >= coalesceBytes:
		w.flushLocked()
	case !w.armed:
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(coalesceDelay, w.timed)
		} else {
			w.timer.Reset(coalesceDelay)
		}
	}
}

func (w *coalescingWriter) timed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed && !w.done {
		w.flushLocked()
	}
}

func (w *coalescingWriter) flushLocked() {
	w.flusher.Flush()
	w.pending = 0
	if w.armed {
		w.armed = false
		w.timer.Stop()
	}
}

// finish flushes what is left while the handler still owns the response,
// and stops the timer for good.
func (w *coalescingWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending > 0 || w.armed {
		w.flushLocked()
	}
	w.done = true
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *coalescingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
