//go:build linux

package insandbox

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// writeCounter counts the writes that reach the connection.
type writeCounter struct {
	net.Conn
	writes atomic.Int64
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(p)
}

// A download of many small files goes out in a few big writes, not one
// per file, and every byte still arrives in order; a file bigger than a
// frame arrives whole.
func TestFileDownloadBatchesWrites(t *testing.T) {
	requireRoot(t)
	wd := t.TempDir()
	srv := &Server{BaseEnv: baseEnv(), Workdir: wd, Logf: t.Logf}
	const n = 300
	var paths []string
	for i := range n {
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(wd, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, name)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*wire.FileChunk/16+1)
	if err := os.WriteFile(filepath.Join(wd, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, "big")
	args, _ := json.Marshal(wire.DownloadArgs{Paths: paths})
	here, there := net.Pipe()
	wc := &writeCounter{Conn: there}
	go func() {
		defer wc.Close()
		srv.copyOut(wc, wire.NewFrameReader(wc), wire.NewFrameWriter(wc), &wire.Request{Op: wire.OpCopyOut, Path: wire.BatchPath, Args: args})
	}()
	var data bytes.Buffer
	files := 0
	r := wire.NewFrameDataReader(wire.NewFrameReader(here), wire.FrameTar, wire.FrameTarEnd, true)
	err := safetar.ReadEntries(r, func(hdr *tar.Header, d io.Reader) error {
		if _, ok := hdr.PAXRecords[wire.PAXCode]; ok {
			return fmt.Errorf("%s failed: %v", hdr.Name, hdr.PAXRecords)
		}
		if _, ok := hdr.PAXRecords[wire.PAXAppend]; !ok {
			if want := filepath.Join(wd, paths[files]); hdr.Name != want {
				return fmt.Errorf("file %d is %s, want %s", files, hdr.Name, want)
			}
			files++
		}
		_, err := io.Copy(&data, d)
		return err
	})
	if err == nil {
		_, err = io.Copy(io.Discard, r)
	}
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range n {
		fmt.Fprintf(&want, "f%d", i)
	}
	want.Write(big)
	if files != n+1 || !bytes.Equal(data.Bytes(), want.Bytes()) {
		t.Fatalf("%d files, %d bytes of data; want all %d files, %d bytes", files, data.Len(), n+1, want.Len())
	}
	// One frame per file unbatched: 300 and more writes. Batched, the
	// small files fit in a handful (plus any the 5 ms flush adds on a slow
	// machine), the big file's pieces go straight through.
	if w := wc.writes.Load(); w > 60 {
		t.Errorf("%d writes for %d files", w, n+1)
	}
}
