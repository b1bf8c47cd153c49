package insandbox

import (
	"sort"
	"sync"
)

// outputLog keeps the recent output of a background process for any number
// of attached readers. Writers never block on readers: a reader that falls
// more than the ring's size behind loses the oldest data (and is told).
//
// Each stream keeps its last logBytes bytes as chunks tagged with a
// sequence number shared by both streams, so a reader replays stdout and
// stderr interleaved as they were produced.
type outputLog struct {
	mu       sync.Mutex
	seq      uint64
	streams  [2]logStream
	maxBytes int
	closed   bool
	dropped  bool          // some output fell out of the ring
	wake     chan struct{} // closed and replaced on every change
}

type logStream struct {
	chunks []logChunk // oldest first, contiguous in offset
	size   int        // bytes held
	end    int64      // bytes ever written
}

type logChunk struct {
	seq  uint64
	off  int64 // stream offset of data[0]
	data []byte
}

// logChunkMax is the most bytes coalesced into one chunk; logMaxChunks
// bounds the chunk headers when stdout and stderr alternate in tiny writes.
const (
	logChunkMax  = 32 << 10
	logMaxChunks = 4096
)

func newOutputLog(maxBytes int) *outputLog {
	return &outputLog{maxBytes: maxBytes, wake: make(chan struct{})}
}

// write appends p to stream (0 stdout, 1 stderr).
func (l *outputLog) write(stream int, p []byte) {
	if len(p) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &l.streams[stream]
	for len(p) > 0 {
		// Append to the stream's last chunk only if nothing was written
		// since, so replay order across streams stays exact.
		if n := len(st.chunks); n > 0 && st.chunks[n-1].seq == l.seq && len(st.chunks[n-1].data) < logChunkMax {
			last := &st.chunks[n-1]
			k := min(len(p), logChunkMax-len(last.data))
			last.data = append(last.data, p[:k]...)
			st.end += int64(k)
			st.size += k
			p = p[k:]
			continue
		}
		k := min(len(p), logChunkMax)
		l.seq++
		st.chunks = append(st.chunks, logChunk{seq: l.seq, off: st.end, data: append(make([]byte, 0, max(k, 256)), p[:k]...)})
		st.end += int64(k)
		st.size += k
		p = p[k:]
	}
	for st.size > l.maxBytes {
		first := &st.chunks[0]
		excess := st.size - l.maxBytes
		if len(first.data) <= excess {
			st.size -= len(first.data)
			st.chunks = st.chunks[1:]
		} else {
			first.data = first.data[excess:]
			first.off += int64(excess)
			st.size -= excess
		}
		l.dropped = true
	}
	for len(st.chunks) > logMaxChunks {
		st.size -= len(st.chunks[0].data)
		st.chunks = st.chunks[1:]
		l.dropped = true
	}
	l.signal()
}

// close marks the end of the output: readers that have caught up stop.
func (l *outputLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.signal()
}

func (l *outputLog) signal() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// loseOutput records output lost outside the ring: bytes the process
// wrote that were still unread when its pipes were closed.
func (l *outputLog) loseOutput() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropped = true
}

// lostOutput reports whether the ring ever dropped output.
func (l *outputLog) lostOutput() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// logCursor is one reader's position in both streams.
type logCursor struct {
	pos    [2]int64
	missed bool // the reader skipped output that had left the ring
}

// next returns a copy of the next piece of output for c (at most max
// bytes) and its stream. With no piece it returns a nil slice, a channel
// closed on the next change, and whether the output has ended.
func (l *outputLog) next(c *logCursor, max int) (stream int, data []byte, wake <-chan struct{}, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	best, bestIdx := -1, 0
	var bestSeq uint64
	for s := range l.streams {
		st := &l.streams[s]
		if len(st.chunks) == 0 || c.pos[s] >= st.end {
			continue
		}
		if c.pos[s] < st.chunks[0].off {
			c.pos[s] = st.chunks[0].off
			c.missed = true
		}
		// The first chunk that ends after the reader's position.
		i := sort.Search(len(st.chunks), func(i int) bool {
			ch := &st.chunks[i]
			return ch.off+int64(len(ch.data)) > c.pos[s]
		})
		if i == len(st.chunks) {
			continue
		}
		if best < 0 || st.chunks[i].seq < bestSeq {
			best, bestIdx, bestSeq = s, i, st.chunks[i].seq
		}
	}
	if best < 0 {
		return 0, nil, l.wake, l.closed
	}
	ch := &l.streams[best].chunks[bestIdx]
	from := int(c.pos[best] - ch.off)
	n := min(len(ch.data)-from, max)
	data = append([]byte(nil), ch.data[from:from+n]...)
	c.pos[best] += int64(n)
	return best, data, nil, false
}
