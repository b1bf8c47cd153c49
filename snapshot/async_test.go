//go:build linux

package snapshot

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"
)

type slowWriter struct {
	buf    bytes.Buffer
	failAt int
	writes int
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.failAt > 0 && w.writes >= w.failAt {
		return 0, errors.New("disk full")
	}
	if len(p) > asyncPiece {
		return 0, errors.New("piece too large")
	}
	return w.buf.Write(p)
}

// TestAsyncWriter: everything arrives in order, in pieces of at most 1 MiB,
// and a write error comes back from Close.
func TestAsyncWriter(t *testing.T) {
	data := make([]byte, 5*asyncPiece+12345)
	rand.New(rand.NewSource(1)).Read(data)
	w := &slowWriter{}
	a := newAsyncWriter(w)
	for off := 0; off < len(data); {
		n := min(len(data)-off, 1+rand.Intn(100000))
		if _, err := a.Write(data[off : off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.buf.Bytes(), data) || w.writes != 6 {
		t.Errorf("got %d bytes in %d writes, want %d in 6", w.buf.Len(), w.writes, len(data))
	}
	f := &slowWriter{failAt: 2}
	a = newAsyncWriter(f)
	a.Write(data)
	if err := a.Close(); err == nil || err.Error() != "disk full" {
		t.Errorf("close after a failed write: %v", err)
	}
}
