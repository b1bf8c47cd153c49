package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	payloads := []struct {
		t FrameType
		p []byte
	}{
		{FrameRequest, []byte(`{"op":"ping"}`)},
		{FrameStdin, nil},
		{FrameStdinClose, nil},
		{FrameStdout, bytes.Repeat([]byte("o"), 70<<10)}, // above copyLimit: separate writes
		{FrameStderr, []byte("e")},
		{FrameResult, []byte(`{}`)},
		{FrameError, []byte(`{"message":"x","code":"internal"}`)},
		{FrameTar, bytes.Repeat([]byte{0}, MaxFramePayload)},
		{FrameTarEnd, nil},
		{FrameOK, nil},
	}
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	for _, p := range payloads {
		if err := fw.WriteFrame(p.t, p.p); err != nil {
			t.Fatalf("write %s: %v", p.t, err)
		}
	}
	fr := NewFrameReader(&buf)
	for _, p := range payloads {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("read %s: %v", p.t, err)
		}
		if f.Type != p.t || !bytes.Equal(f.Payload, p.p) {
			t.Fatalf("got %s/%d bytes, want %s/%d bytes", f.Type, len(f.Payload), p.t, len(p.p))
		}
	}
	if _, err := fr.ReadFrame(); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

func TestFrameStreamWriterSplits(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf)
	data := bytes.Repeat([]byte("0123456789"), 10000) // 100 kB > DataChunk
	if n, err := fw.StreamWriter(FrameTar).Write(data); err != nil || n != len(data) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	fr := NewFrameReader(&buf)
	var got []byte
	for {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != FrameTar || len(f.Payload) > DataChunk {
			t.Fatalf("frame %s of %d bytes", f.Type, len(f.Payload))
		}
		got = append(got, f.Payload...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("stream data differs")
	}
}

func header(t FrameType, n uint32) []byte {
	b := []byte{byte(t), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

func TestFrameReaderRejects(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"truncated header", []byte{byte(FrameStdout), 0, 0}, io.ErrUnexpectedEOF},
		{"truncated payload", append(header(FrameStdout, 10), "abc"...), io.ErrUnexpectedEOF},
		{"missing payload", header(FrameStdout, 10), io.ErrUnexpectedEOF},
		{"oversize", header(FrameStdout, MaxFramePayload+1), ErrFrameTooLarge},
		{"huge", header(FrameTar, 0xffffffff), ErrFrameTooLarge},
		{"type zero", header(0, 0), ErrUnknownFrame},
		{"type past last", header(maxFrameType+1, 0), ErrUnknownFrame},
		{"type 255", header(255, 1), ErrUnknownFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewFrameReader(bytes.NewReader(tt.input)).ReadFrame()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFrameReaderDoesNotAllocateClaimedSize(t *testing.T) {
	fr := NewFrameReader(bytes.NewReader(header(FrameTar, 0xffffffff)))
	if _, err := fr.ReadFrame(); err == nil {
		t.Fatal("expected error")
	}
	if cap(fr.buf) != 0 {
		t.Fatalf("allocated %d bytes for a rejected frame", cap(fr.buf))
	}
}

func TestFrameWriterRejects(t *testing.T) {
	fw := NewFrameWriter(io.Discard)
	if err := fw.WriteFrame(FrameTar, make([]byte, MaxFramePayload+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	if err := fw.WriteFrame(0, nil); !errors.Is(err, ErrUnknownFrame) {
		t.Fatalf("type 0: %v", err)
	}
	if !strings.Contains(FrameType(200).String(), "200") {
		t.Fatal("unknown type String should show the number")
	}
}

func FuzzReadFrame(f *testing.F) {
	var sample bytes.Buffer
	fw := NewFrameWriter(&sample)
	fw.WriteFrame(FrameRequest, []byte(`{"op":"exec","exec":{"args":["true"]}}`))
	fw.WriteFrame(FrameStdout, []byte("hello"))
	fw.WriteFrame(FrameOK, nil)
	f.Add(sample.Bytes())
	f.Add(header(FrameTar, MaxFramePayload+1))
	f.Add(header(99, 0))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data))
		var out bytes.Buffer
		rw := NewFrameWriter(&out)
		consumed := 0
		for {
			fr0, err := fr.ReadFrame()
			if err != nil {
				break
			}
			if !fr0.Type.valid() || len(fr0.Payload) > MaxFramePayload {
				t.Fatalf("reader returned invalid frame %s/%d", fr0.Type, len(fr0.Payload))
			}
			consumed += FrameHeaderLen + len(fr0.Payload)
			if err := rw.WriteFrame(fr0.Type, fr0.Payload); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
		}
		// Every frame that was accepted re-encodes to exactly its input.
		if !bytes.Equal(out.Bytes(), data[:consumed]) {
			t.Fatal("re-encoded frames differ from input")
		}
	})
}

func BenchmarkFrameEncode(b *testing.B) {
	for _, size := range []int{0, 64, DataChunk} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			fw := NewFrameWriter(io.Discard)
			p := make([]byte, size)
			b.SetBytes(int64(size + FrameHeaderLen))
			b.ReportAllocs()
			for b.Loop() {
				if err := fw.WriteFrame(FrameStdout, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
