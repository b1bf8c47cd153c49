//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	"github.com/boxd-dev/boxd/internal/safetar"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// BenchmarkTree moves a tree of 1,000 small files (100 B to 8 KiB, in
// directories of ten, as make bench's files scenario writes it) into and
// out of a real sandbox through the API: CopyIn of a tar (what boxctl cp
// sends), UploadFiles, CopyOut, DownloadFiles. For profiling where a
// small file's time goes:
//
//	go test ./e2e -run '^$' -bench Tree -benchtime 10x
func BenchmarkTree(b *testing.B) {
	ctx := context.Background()
	sb, err := env.api.CreateSandbox(ctx, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		b.Fatal(err)
	}
	id := sb.Msg.Sandbox.Id
	b.Cleanup(func() {
		env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
	})
	local := filepath.Join(b.TempDir(), "tree")
	var rels []string
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		rel := fmt.Sprintf("d%02d/s%d/f%d.txt", i/100, i/10%10, i%10)
		p := filepath.Join(local, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 100+rng.IntN(8<<10-100))
		for j := range buf {
			buf[j] = byte('a' + rng.IntN(26))
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
		rels = append(rels, rel)
	}
	fc := rpcclient.NewFiles(env.socket)
	rm := func() {
		if _, err := env.api.Exec(ctx, connect.NewRequest(&boxdv1.ExecRequest{SandboxId: id, Args: []string{"rm", "-rf", "/workspace/tree"}})); err != nil {
			b.Fatal(err)
		}
	}
	copyIn := func(dest string) {
		stream := env.api.CopyIn(ctx)
		first := true
		mw := &safetar.BatchWriter{Max: apiwire.ChunkBytes, Send: func(p []byte) error {
			msg := &boxdv1.CopyInRequest{Data: p}
			if first {
				msg.SandboxId, msg.Path, first = id, dest, false
			}
			return stream.Send(msg)
		}}
		err := safetar.Write(mw, local, "tree")
		if err == nil {
			err = mw.Flush()
		}
		if _, cerr := stream.CloseAndReceive(); err != nil || cerr != nil {
			b.Fatalf("copy in: %v %v", err, cerr)
		}
	}
	upload := func() {
		us := fc.UploadFiles(ctx)
		if err := us.Send(&boxdv1.UploadFilesRequest{SandboxId: id, Parents: true}); err != nil {
			b.Fatal(err)
		}
		mode := uint32(0o644)
		for _, rel := range rels {
			data, err := os.ReadFile(filepath.Join(local, rel))
			if err != nil {
				b.Fatal(err)
			}
			if err := us.Send(&boxdv1.UploadFilesRequest{File: &boxdv1.UploadFile{Path: "/workspace/tree/" + rel, Mode: &mode}, Data: data}); err != nil {
				break
			}
		}
		res, err := us.CloseAndReceive()
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res.Msg.Results {
			if r.Error != nil {
				b.Fatalf("upload %s: %v", r.Path, r.Error)
			}
		}
	}
	b.Run("copyin", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			rm()
			b.StartTimer()
			copyIn("/workspace/tree")
		}
	})
	// The same into a new name each time, nothing removed in between:
	// ext4 without a journal skips inodes freed in the last minutes
	// (recently_deleted), which makes creating right after a removal slow.
	b.Run("copyin-fresh", func(b *testing.B) {
		n := 0
		for b.Loop() {
			n++
			copyIn(fmt.Sprintf("/workspace/fresh%d", n))
		}
	})
	b.Run("upload", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			rm()
			b.StartTimer()
			upload()
		}
	})
	out := b.TempDir()
	b.Run("copyout", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			os.RemoveAll(filepath.Join(out, "tree"))
			b.StartTimer()
			rs, err := env.api.CopyOut(ctx, connect.NewRequest(&boxdv1.CopyOutRequest{SandboxId: id, Path: "/workspace/tree"}))
			if err != nil {
				b.Fatal(err)
			}
			pr, pw := io.Pipe()
			go func() {
				for rs.Receive() {
					if _, err := pw.Write(rs.Msg().Data); err != nil {
						break
					}
				}
				pw.CloseWithError(rs.Err())
			}()
			if err := safetar.Extract(pr, out, safetar.Options{Top: "tree"}); err != nil {
				b.Fatal(err)
			}
			pr.Close()
			rs.Close()
		}
	})
	paths := make([]string, len(rels))
	for i, rel := range rels {
		paths[i] = "/workspace/tree/" + rel
	}
	b.Run("download", func(b *testing.B) {
		for b.Loop() {
			rs, err := fc.DownloadFiles(ctx, connect.NewRequest(&boxdv1.DownloadFilesRequest{SandboxId: id, Paths: paths}))
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rs.Receive() {
				if d := rs.Msg().GetDone(); d != nil {
					if d.Error != nil {
						b.Fatalf("download %s: %v", d.Path, d.Error)
					}
					n++
				}
			}
			if err := rs.Err(); err != nil || n != len(paths) {
				b.Fatalf("download: %d files, %v", n, err)
			}
			rs.Close()
		}
	})
}
