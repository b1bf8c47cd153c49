//go:build linux

package insandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/boxd-dev/boxd/agent/host"
	"github.com/boxd-dev/boxd/agent/wire"
)

// The op table serves every op the wire names and no other.
func TestOpTableMatchesWire(t *testing.T) {
	var served []string
	for name, h := range ops {
		if h == nil {
			t.Errorf("op %q has no handler", name)
		}
		served = append(served, name)
	}
	want := slices.Clone(wire.Ops)
	slices.Sort(served)
	slices.Sort(want)
	if !slices.Equal(served, want) {
		t.Errorf("op table serves %v, wire names %v", served, want)
	}
}

// Every copy into the sandbox is one op: a tree (SandboxService.CopyIn,
// `boxctl cp`, image builds' COPY) and a batch of files
// (FileService.UploadFiles) both reach the init as copy-in, whose one tar
// reader (copyIn) serves them; the retired upload op is served no more.
func TestCopiesInShareOneOp(t *testing.T) {
	for _, name := range wire.Retired {
		if _, ok := ops[name]; ok {
			t.Errorf("retired op %q is still served", name)
		}
	}
	seen := countOps(t)
	tg := startServer(t)
	ctx := context.Background()

	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "tree.txt", Mode: 0o644, Size: 4})
	tw.Write([]byte("tree"))
	tw.Close()
	if err := tg.client.CopyIn(ctx, tg.workdir, &tarBuf); err != nil {
		t.Fatalf("copy-in of a tree: %v", err)
	}
	done := false
	var results []wire.FileResult
	err := tg.client.UploadFiles(ctx, wire.UploadArgs{}, func() (wire.UploadItem, io.Reader, error) {
		if done {
			return wire.UploadItem{}, nil, io.EOF
		}
		done = true
		return wire.UploadItem{Path: "batch.txt"}, strings.NewReader("batch"), nil
	}, func(r wire.FileResult) error { results = append(results, r); return nil })
	if err != nil || len(results) != 1 || results[0].Code != "" {
		t.Fatalf("upload: %v %+v", err, results)
	}
	for name, want := range map[string]string{"tree.txt": "tree", "batch.txt": "batch"} {
		if b, err := os.ReadFile(filepath.Join(tg.workdir, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if want := map[string]int{wire.OpCopyIn: 2}; !maps.Equal(seen(), want) {
		t.Errorf("ops asked for = %v, want %v: both kinds of copy through copy-in", seen(), want)
	}
}

// Every copy out of the sandbox is one op: a tree (SandboxService.CopyOut,
// `boxctl cp`, the Docker endpoint's archive GET) and a batch of files
// (FileService.DownloadFiles) both reach the init as copy-out, whose one
// tar writer (copyOut) serves them; the retired download op is served no
// more.
func TestCopiesOutShareOneOp(t *testing.T) {
	if _, ok := ops[wire.OpFileDownload]; ok || !slices.Contains(wire.Retired, wire.OpFileDownload) {
		t.Errorf("the download op is served or not retired")
	}
	seen := countOps(t)
	tg := startServer(t)
	ctx := context.Background()
	for name, data := range map[string]string{"tree.txt": "tree", "batch.txt": "batch"} {
		if err := os.WriteFile(filepath.Join(tg.workdir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var tarBuf bytes.Buffer
	if err := tg.client.CopyOut(ctx, filepath.Join(tg.workdir, "tree.txt"), &tarBuf); err != nil {
		t.Fatalf("copy-out of a tree: %v", err)
	}
	tr := tar.NewReader(&tarBuf)
	if hdr, err := tr.Next(); err != nil || hdr.Name != "tree.txt" {
		t.Fatalf("copy-out of a tree: %v %v", hdr, err)
	}
	if b, _ := io.ReadAll(tr); string(b) != "tree" {
		t.Errorf("tree.txt: %q", b)
	}
	var got bytes.Buffer
	var results []wire.FileResult
	err := tg.client.DownloadFiles(ctx, wire.DownloadArgs{Paths: []string{"batch.txt"}}, host.DownloadHandler{
		Data: func(_ int, p []byte) error { got.Write(p); return nil },
		Done: func(r wire.FileResult) error { results = append(results, r); return nil },
	})
	if err != nil || len(results) != 1 || results[0].Code != "" || got.String() != "batch" {
		t.Fatalf("download: %v %+v %q", err, results, got.String())
	}
	if want := map[string]int{wire.OpCopyOut: 2}; !maps.Equal(seen(), want) {
		t.Errorf("ops asked for = %v, want %v: both kinds of copy through copy-out", seen(), want)
	}
}

// countOps counts what the init is asked for, op by op, until the test
// ends (the table is restored before any other test runs); seen returns
// the counts, pings left out.
func countOps(t *testing.T) (seen func() map[string]int) {
	var mu sync.Mutex
	counts := map[string]int{}
	saved := maps.Clone(ops)
	t.Cleanup(func() { maps.Copy(ops, saved) })
	for name, h := range saved {
		ops[name] = func(s *Server, conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) bool {
			mu.Lock()
			counts[name]++
			mu.Unlock()
			return h(s, conn, fr, fw, req)
		}
	}
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		c := maps.Clone(counts)
		delete(c, wire.OpPing)
		return c
	}
}
