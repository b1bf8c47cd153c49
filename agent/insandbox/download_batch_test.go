//go:build linux

package insandbox

import (
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

// A download of many small files goes out in a few big writes, not three
// per file, and every byte and mark still arrives in order; a file bigger
// than the batch still arrives whole.
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
	big := bytes.Repeat([]byte("0123456789abcdef"), (downloadBatch+3*wire.FileChunk)/16)
	if err := os.WriteFile(filepath.Join(wd, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, "big")
	args, _ := json.Marshal(wire.DownloadArgs{Paths: paths})
	here, there := net.Pipe()
	wc := &writeCounter{Conn: there}
	go func() {
		defer wc.Close()
		srv.fileDownload(wc, wire.NewFrameReader(wc), wire.NewFrameWriter(wc), &wire.Request{Op: wire.OpFileDownload, Args: args})
	}()
	fr := wire.NewFrameReader(here)
	var data bytes.Buffer
	marks, gotOK := 0, false
	for !gotOK {
		f, err := fr.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case wire.FrameResult:
			var m wire.DownloadMark
			if err := json.Unmarshal(f.Payload, &m); err != nil {
				t.Fatal(err)
			}
			if m.Done != nil {
				if m.Done.Code != "" || m.Index != marks {
					t.Fatalf("done mark %+v, want file %d without error", m, marks)
				}
				marks++
			}
		case wire.FrameFileData:
			data.Write(f.Payload)
		case wire.FrameOK:
			gotOK = true
		default:
			t.Fatalf("unexpected %s frame", f.Type)
		}
	}
	var want bytes.Buffer
	for i := range n {
		fmt.Fprintf(&want, "f%d", i)
	}
	want.Write(big)
	if !gotOK || marks != n+1 || !bytes.Equal(data.Bytes(), want.Bytes()) {
		t.Fatalf("ok %v, %d done marks, %d bytes of data; want all %d files, %d bytes", gotOK, marks, data.Len(), n+1, want.Len())
	}
	// Three frames per file unbatched: 903 writes. Batched, the small
	// files fit in a handful (plus any the 5 ms flush adds on a slow
	// machine), the big file's chunks go straight through.
	if w := wc.writes.Load(); w > 60 {
		t.Errorf("%d writes for %d files", w, n+1)
	}
}
