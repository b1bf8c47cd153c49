package safetar

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// BatchWriter gathers small writes into pieces of up to Max bytes and sends
// big ones as they are, cut at Max, with every byte in order.
func TestBatchWriterPieces(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name   string
		writes []int // sizes, in order; then Flush
		pieces []int // sizes sent
	}{
		{"small writes gathered", []int{512, 100, 1024}, []int{1636}},
		{"big write alone", []int{mib}, []int{mib}},
		{"header then file data", []int{512, 2*mib + mib/2, 512}, []int{512, mib, mib, mib / 2, 512}},
		{"small writes overflowing a piece", []int{mib - 100, 200}, []int{mib - 100, 200}},
		{"just below bigWrite is gathered", []int{bigWrite - 1, 10}, []int{bigWrite + 9}},
		{"nothing", nil, nil},
	}
	for _, tt := range tests {
		for _, pooled := range []bool{false, true} {
			var got []byte
			var sizes []int
			w := &BatchWriter{Max: mib, Send: func(b []byte) error {
				sizes = append(sizes, len(b))
				got = append(got, b...)
				return nil
			}}
			if pooled {
				w.Buf = make([]byte, 0, mib)
			}
			var want []byte
			for i, n := range tt.writes {
				p := bytes.Repeat([]byte{byte('a' + i)}, n)
				want = append(want, p...)
				if m, err := w.Write(p); err != nil || m != n {
					t.Fatalf("%s: write %d: %d, %v", tt.name, n, m, err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s (pooled %v): data differs: %d bytes, want %d", tt.name, pooled, len(got), len(want))
			}
			if !slices.Equal(sizes, tt.pieces) {
				t.Errorf("%s (pooled %v): pieces %v, want %v", tt.name, pooled, sizes, tt.pieces)
			}
			if pooled && cap(w.Buf) != mib {
				t.Errorf("%s: the given buffer grew to %d", tt.name, cap(w.Buf))
			}
		}
	}
}

// A failed send is returned, with how much of a big write went out.
func TestBatchWriterSendError(t *testing.T) {
	boom := errors.New("boom")
	sent := 0
	w := &BatchWriter{Max: 1 << 20, Send: func(b []byte) error {
		if sent > 0 {
			return boom
		}
		sent += len(b)
		return nil
	}}
	if n, err := w.Write(make([]byte, 3<<20)); n != 1<<20 || !errors.Is(err, boom) {
		t.Errorf("write: %d, %v; want %d, boom", n, err, 1<<20)
	}
}
