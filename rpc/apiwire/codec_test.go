package apiwire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// ChunkCodec must decode exactly as proto.Unmarshal does, whatever the
// order and repetition of the fields, with data in a pooled buffer.
func TestChunkCodecUnmarshal(t *testing.T) {
	mode := uint32(0o600)
	full := &boxdv1.WriteFileRequest{SandboxId: "sb", Path: "p", Mode: &mode, Parents: true, Data: []byte("hello")}
	canon, err := proto.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	data := func(s string) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), []byte(s))
	}
	path := func(s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), s)
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	big := string(bytes.Repeat([]byte{7}, ChunkBytes+1))
	for _, tc := range []struct {
		name string
		wire []byte
	}{
		{"canonical", canon},
		{"data only", data("x")},
		{"empty", nil},
		{"data first", cat(data("d"), path("p"))},
		{"data twice, last wins", cat(data("first"), path("p"), data("second"))},
		{"no data", path("p")},
		{"larger than a pooled buffer", cat(path("p"), data(big))},
		{"malformed", []byte{0x4a, 0x05, 'a'}},
		{"data with the wrong wire type", []byte{0x48, 0x01}},
		{"a pooled size class", cat(path("p"), data(string(make([]byte, 300<<10))))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := &boxdv1.WriteFileRequest{}
			wantErr := proto.Unmarshal(tc.wire, want)
			got := &boxdv1.WriteFileRequest{}
			gotErr := ChunkCodec{}.Unmarshal(tc.wire, got)
			if (gotErr != nil) != (wantErr != nil) {
				t.Fatalf("error %v, proto.Unmarshal says %v", gotErr, wantErr)
			}
			if wantErr == nil && !proto.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			if n := len(got.Data); n >= minPooled && n <= ChunkBytes && (cap(got.Data) < n || cap(got.Data) > 2*n) {
				t.Errorf("%d bytes of data in a pooled buffer of %d", n, cap(got.Data))
			}
			RecycleChunk(got.Data)
		})
	}
}

// A recycled buffer is reused, and a decoded message does not alias the
// wire bytes (connect reuses them).
func TestChunkCodecRecycle(t *testing.T) {
	wire, _ := proto.Marshal(&boxdv1.ReadFileResponse{Data: []byte("abc")})
	m := &boxdv1.ReadFileResponse{}
	if err := (ChunkCodec{}).Unmarshal(wire, m); err != nil {
		t.Fatal(err)
	}
	wire[len(wire)-1] = 'X'
	if string(m.Data) != "abc" {
		t.Fatalf("data aliases the wire bytes: %q", m.Data)
	}
	RecycleChunk(m.Data)
	RecycleChunk(make([]byte, 10)) // not from a pool: ignored
	for _, tc := range []struct{ n, cap int }{
		{5, 5}, {minPooled - 1, minPooled - 1}, {minPooled, minPooled}, {minPooled + 1, 2 * minPooled},
		{256 << 10, 256 << 10}, {ChunkBytes, ChunkBytes}, {ChunkBytes + 1, ChunkBytes + 1},
	} {
		b := getChunk(tc.n)
		if len(b) != tc.n || cap(b) != tc.cap {
			t.Errorf("getChunk(%d): len %d cap %d, want cap %d", tc.n, len(b), cap(b), tc.cap)
		}
		RecycleChunk(b)
	}
	b := getChunk(ChunkBytes)
	b[0] = 42
	RecycleChunk(b)
	if b2 := getChunk(ChunkBytes - 1); &b2[0] != &b[0] {
		t.Log("a recycled buffer was not reused (the pool may have been cleared by a GC)")
	}
}

func BenchmarkChunkCodecUnmarshal(b *testing.B) {
	wire, _ := proto.Marshal(&boxdv1.WriteFileRequest{Data: make([]byte, ChunkBytes)})
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		m := &boxdv1.WriteFileRequest{}
		if err := (ChunkCodec{}).Unmarshal(wire, m); err != nil {
			b.Fatal(err)
		}
		RecycleChunk(m.Data)
	}
}
