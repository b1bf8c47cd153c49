package apiwire

import (
	"fmt"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// ChunkCodec is the protobuf codec with one difference: the data of the
// messages that carry file or tar bytes lands in a buffer from a pool
// instead of a fresh allocation. Whoever is done with such a message's
// data may hand it back with RecycleChunk; data never handed back is
// garbage collected as usual.
//
// Why: a fresh megabyte per message is a megabyte of first-touch page
// faults once the garbage collector has freed the last one and the
// scavenger has returned it to the kernel, and page faults are dear in a
// VM (about 3 ms per MiB on boxd's reference machine: as much as the rest
// of the copy). The pool also keeps the garbage collector from running
// every few megabytes.
//
// boxd's server and this package's clients use it; it is the "proto"
// codec, so the wire format is unchanged.
type ChunkCodec struct{}

var _ connect.Codec = ChunkCodec{}

// ChunkBytes is the largest pooled buffer; larger data gets a buffer of
// its own. boxd sends file data in chunks of this size.
const ChunkBytes = 1 << 20

// minPooled is the smallest pooled buffer: smaller data is not worth it.
const minPooled = 64 << 10

// chunkPools holds buffers by size class: capacity minPooled << i, up to
// ChunkBytes. Data gets the smallest class that holds it, so a message
// nobody recycles costs at most twice its size, as before.
var chunkPools [5]sync.Pool // of *[]byte

func chunkClass(n int) int {
	c := 0
	for minPooled<<c < n {
		c++
	}
	return c
}

func getChunk(n int) []byte {
	if n < minPooled || n > ChunkBytes {
		return make([]byte, n)
	}
	c := chunkClass(n)
	if p, ok := chunkPools[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, minPooled<<c)
}

// RecycleChunk hands back the data of a message ChunkCodec decoded
// (WriteFileRequest, ReadFileResponse, UploadFilesRequest, CopyInRequest,
// CopyOutResponse) once nothing uses it any more; it is a no-op for data
// that did not come from a pool. Later messages reuse the memory, so the
// caller must not touch b afterwards.
func RecycleChunk(b []byte) {
	n := cap(b)
	if n < minPooled || n > ChunkBytes || n != minPooled<<chunkClass(n) {
		return
	}
	b = b[:0]
	chunkPools[chunkClass(n)].Put(&b)
}

func (ChunkCodec) Name() string { return "proto" }

func (ChunkCodec) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", m)
	}
	return proto.Marshal(pm)
}

// MarshalAppend lets connect marshal into its pooled buffers.
func (ChunkCodec) MarshalAppend(dst []byte, m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, pm)
}

func (ChunkCodec) Unmarshal(b []byte, m any) error {
	switch m := m.(type) {
	case *boxdv1.WriteFileRequest:
		return unmarshalChunk(b, m, 9, &m.Data)
	case *boxdv1.ReadFileResponse:
		return unmarshalChunk(b, m, 2, &m.Data)
	case *boxdv1.UploadFilesRequest:
		return unmarshalChunk(b, m, 5, &m.Data)
	case *boxdv1.CopyInRequest:
		return unmarshalChunk(b, m, 3, &m.Data)
	case *boxdv1.CopyOutResponse:
		return unmarshalChunk(b, m, 1, &m.Data)
	case proto.Message:
		return proto.Unmarshal(b, m)
	}
	return fmt.Errorf("%T is not a proto.Message", m)
}

// unmarshalChunk decodes b into m, the bytes field number field into a
// pooled buffer and the other fields with proto.Unmarshal. As in any
// proto decoder, the last occurrence of the field wins.
func unmarshalChunk(b []byte, msg proto.Message, field protowire.Number, data *[]byte) error {
	var val []byte
	found := false
	var rest []byte // b without the data field, once there is one
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return proto.Unmarshal(b, msg) // malformed: let proto say why
		}
		var m int
		if num == field && typ == protowire.BytesType {
			val, m = protowire.ConsumeBytes(b[off+n:])
		} else {
			m = protowire.ConsumeFieldValue(num, typ, b[off+n:])
		}
		if m < 0 {
			return proto.Unmarshal(b, msg)
		}
		switch {
		case num == field && typ == protowire.BytesType:
			if !found {
				// Usually the data is the last field, and what precedes
				// it is the rest.
				rest = b[:off:off]
			}
			found = true
		case found:
			rest = append(rest, b[off:off+n+m]...)
		}
		off += n + m
	}
	if !found {
		return proto.Unmarshal(b, msg)
	}
	if err := proto.Unmarshal(rest, msg); err != nil {
		return err
	}
	*data = getChunk(len(val))
	copy(*data, val)
	return nil
}
