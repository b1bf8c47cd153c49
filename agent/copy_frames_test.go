//go:build linux

package agent

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// readFrames decodes every frame in b.
func readFrames(t *testing.T, b []byte) []Frame {
	t.Helper()
	fr := NewFrameReader(bytes.NewReader(b))
	var out []Frame
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Frame{Type: f.Type, Payload: bytes.Clone(f.Payload)})
	}
}

func TestFrameBufferFrames(t *testing.T) {
	const mib = FileChunk
	tests := []struct {
		name   string
		writes []int // sizes, in order; then Flush
		frames []int // payload sizes sent
	}{
		{"small writes gathered", []int{512, 100, 1024}, []int{1636}},
		{"big write alone", []int{mib}, []int{mib}},
		{"header then file data", []int{512, 2*mib + mib/2, 512}, []int{512, mib, mib, mib / 2, 512}},
		{"small writes overflowing a frame", []int{mib - 100, 200}, []int{mib - 100, 200}},
		{"just below bigWrite is gathered", []int{bigWrite - 1, 10}, []int{bigWrite + 9}},
		{"nothing", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			fb := &frameBuffer{fw: NewFrameWriter(&out), t: FrameTar}
			var want []byte
			for i, n := range tt.writes {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				want = append(want, p...)
				if m, err := fb.Write(p); err != nil || m != n {
					t.Fatalf("write %d: %d, %v", n, m, err)
				}
			}
			if err := fb.Flush(); err != nil {
				t.Fatal(err)
			}
			fb.release()
			var got []byte
			var sizes []int
			for _, f := range readFrames(t, out.Bytes()) {
				if f.Type != FrameTar {
					t.Fatalf("frame type %s", f.Type)
				}
				sizes = append(sizes, len(f.Payload))
				got = append(got, f.Payload...)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("data differs: %d bytes, want %d", len(got), len(want))
			}
			if len(sizes) != len(tt.frames) {
				t.Fatalf("frames %v, want %v", sizes, tt.frames)
			}
			for i := range sizes {
				if sizes[i] != tt.frames[i] {
					t.Fatalf("frames %v, want %v", sizes, tt.frames)
				}
			}
		})
	}
}

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
	r := &frameDataReader{fr: NewFrameReader(&in), data: FrameTar, end: FrameTarEnd}
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
	r = &frameDataReader{fr: NewFrameReader(&in), data: FrameTar, end: FrameTarEnd, acceptEr: true}
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
	r = &frameDataReader{fr: NewFrameReader(&in), data: FrameTar, end: FrameTarEnd}
	if _, err := io.Copy(io.Discard, r); err == nil {
		t.Error("cut stream: no error")
	}
}
