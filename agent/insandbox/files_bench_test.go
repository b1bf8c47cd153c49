//go:build linux

package insandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// The file benchmarks move data through a real client and an in-process
// server over the Unix socket, as boxd and the init do, into the file
// system under $TMPDIR.

func BenchmarkWriteFile(b *testing.B) {
	for _, size := range []int64{4 << 10, 1 << 20, 64 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			tg := startServer(b)
			ctx := testCtx(b)
			p := filepath.Join(tg.workdir, "f")
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: p}, io.LimitReader(zeroReader{}, size)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReadFile(b *testing.B) {
	for _, size := range []int64{4 << 10, 1 << 20, 64 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			tg := startServer(b)
			ctx := testCtx(b)
			p := filepath.Join(tg.workdir, "f")
			if _, err := tg.client.WriteFile(ctx, wire.FileWriteArgs{Path: p}, io.LimitReader(zeroReader{}, size)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				s, err := tg.client.ReadFile(ctx, wire.FileReadArgs{Path: p})
				if err != nil {
					b.Fatal(err)
				}
				if n, err := s.WriteTo(io.Discard); err != nil || n != size {
					b.Fatal(n, err)
				}
				s.Close()
			}
		})
	}
}

// BenchmarkUpload1000 uploads 1,000 files of 1 KiB in one call.
func BenchmarkUpload1000(b *testing.B) {
	tg := startServer(b)
	ctx := testCtx(b)
	body := strings.Repeat("x", 1024)
	b.ReportAllocs()
	for b.Loop() {
		i := 0
		err := tg.client.UploadFiles(ctx, wire.UploadArgs{Parents: true}, func() (wire.UploadItem, io.Reader, error) {
			if i == 1000 {
				return wire.UploadItem{}, nil, io.EOF
			}
			i++
			return wire.UploadItem{Path: fmt.Sprintf("up/d%d/f%d", i%10, i)}, strings.NewReader(body), nil
		}, func(r wire.FileResult) error {
			if r.Code != "" {
				return fmt.Errorf("%+v", r)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDownload1000 downloads 1,000 files of 1 KiB in one call, into
// memory: the per-file cost of a batch out, both ends of the init's
// channel (divide by 1,000).
func BenchmarkDownload1000(b *testing.B) {
	tg := startServer(b)
	ctx := testCtx(b)
	body := []byte(strings.Repeat("x", 1024))
	paths := make([]string, 1000)
	for i := range paths {
		paths[i] = fmt.Sprintf("down/d%d/f%d", i%10, i)
		if err := os.MkdirAll(filepath.Join(tg.workdir, filepath.Dir(paths[i])), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tg.workdir, paths[i]), body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		var n int64
		err := tg.client.DownloadFiles(ctx, wire.DownloadArgs{Paths: paths}, host.DownloadHandler{
			Data: func(_ int, p []byte) error { n += int64(len(p)); return nil },
			Done: func(r wire.FileResult) error {
				if r.Code != "" {
					return fmt.Errorf("%+v", r)
				}
				return nil
			},
		})
		if err != nil || n != int64(len(paths)*len(body)) {
			b.Fatal(err, n)
		}
	}
}

func sizeName(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
