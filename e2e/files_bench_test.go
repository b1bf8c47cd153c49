package e2e

import (
	"context"
	"io"
	"testing"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// BenchmarkFileAPI moves 100 MiB into and out of a real sandbox through
// the API from a Go client (FileService WriteFile and ReadFile, 1 MiB
// messages, received buffers recycled):
//
//	go test ./e2e -run '^$' -bench FileAPI -benchtime 10x
func BenchmarkFileAPI(b *testing.B) {
	ctx := context.Background()
	sb, err := env.api.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		b.Fatal(err)
	}
	id := sb.Msg.Sandbox.Id
	b.Cleanup(func() {
		env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	})
	const size = 100 << 20
	data := make([]byte, size)
	if _, err := io.ReadFull(&patternReader{left: size}, data); err != nil {
		b.Fatal(err)
	}
	fc := rpcclient.NewFiles(env.socket)
	write := func() {
		ws := fc.WriteFile(ctx)
		msg := &boxdv1.WriteFileRequest{SandboxId: id, Path: "big.bin"}
		for off := 0; off < size; off += apiwire.ChunkBytes {
			msg.Data = data[off : off+apiwire.ChunkBytes]
			if err := ws.Send(msg); err != nil {
				break // CloseAndReceive says why
			}
			msg = &boxdv1.WriteFileRequest{}
		}
		res, err := ws.CloseAndReceive()
		if err != nil || res.Msg.BytesWritten != size {
			b.Fatalf("write: %v %v", res, err)
		}
	}
	b.Run("write-100MiB", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			write()
		}
	})
	write()
	b.Run("read-100MiB", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			rs, err := fc.ReadFile(ctx, connect.NewRequest(&boxdv1.ReadFileRequest{SandboxId: id, Path: "big.bin"}))
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rs.Receive() {
				n += len(rs.Msg().Data)
				apiwire.RecycleChunk(rs.Msg().Data)
			}
			if err := rs.Err(); err != nil || n != size {
				b.Fatalf("read %d bytes: %v", n, err)
			}
			rs.Close()
		}
	})
}
