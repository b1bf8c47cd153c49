//go:build linux

package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// writeSizes records the size of each write.
type writeSizes struct {
	bytes.Buffer
	writes []int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.Buffer.Write(p)
}

func TestFrameDataReaderWriteTo(t *testing.T) {
	var in bytes.Buffer
	fw := NewFrameWriter(&in)
	a, b := bytes.Repeat([]byte("a"), 300<<10), bytes.Repeat([]byte("b"), 5)
	fw.WriteFrame(FrameTar, a)
	fw.WriteFrame(FrameTar, b)
	fw.WriteFrame(FrameTarEnd, nil)
	var w writeSizes
	r := NewFrameDataReader(NewFrameReader(&in), FrameTar, FrameTarEnd, false)
	n, err := io.Copy(&w, r)
	if err != nil || n != int64(len(a)+len(b)) {
		t.Fatalf("copy: %d, %v", n, err)
	}
	if !bytes.Equal(w.Bytes(), append(a, b...)) {
		t.Error("data differs")
	}
	// One write per frame: not cut into io.Copy's 32 KiB.
	if len(w.writes) != 2 || w.writes[0] != len(a) {
		t.Errorf("writes %v, want one per frame", w.writes)
	}

	// The peer's error frame ends the stream with its error.
	in.Reset()
	fw.WriteFrame(FrameTar, b)
	fw.WriteJSON(FrameError, RemoteError{Message: "boom", Code: CodeNotFound})
	r = NewFrameDataReader(NewFrameReader(&in), FrameTar, FrameTarEnd, true)
	w = writeSizes{}
	_, err = io.Copy(&w, r)
	var re *RemoteError
	if !errors.As(err, &re) || re.Message != "boom" {
		t.Errorf("error %v, want the remote error", err)
	}
	if w.String() != "bbbbb" {
		t.Errorf("data before the error %q", w.String())
	}
	// A stream cut before the end frame is an error, not a clean end.
	in.Reset()
	fw.WriteFrame(FrameTar, b)
	r = NewFrameDataReader(NewFrameReader(&in), FrameTar, FrameTarEnd, false)
	if _, err := io.Copy(io.Discard, r); err == nil {
		t.Error("cut stream: no error")
	}
}
