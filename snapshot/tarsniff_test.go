package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// TestSniffTar: tars of every format pass whole; a text file, a short file
// or a gzipped tar is invalid_argument "not a tar or OCI archive" naming
// the data field.
func TestSniffTar(t *testing.T) {
	mk := func(f tar.Format, name string) []byte {
		var b bytes.Buffer
		w := tar.NewWriter(&b)
		if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 2, Format: f, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("{}"))
		w.Close()
		return b.Bytes()
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(mk(tar.FormatUSTAR, "index.json"))
	zw.Close()
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"ustar", mk(tar.FormatUSTAR, "index.json"), true},
		{"pax", mk(tar.FormatPAX, strings.Repeat("d/", 80)+"index.json"), true},
		{"gnu", mk(tar.FormatGNU, strings.Repeat("d/", 80)+"index.json"), true},
		{"empty tar", make([]byte, 1024), true},
		{"hostname", []byte("sandbox-host\n"), false},
		{"nothing", nil, false},
		{"text", []byte(strings.Repeat("not a tar at all\n", 64)), false},
		{"gzip", gz.Bytes(), false},
	} {
		r, err := sniffTar(bytes.NewReader(tc.data))
		if !tc.ok {
			if !errdefs.IsInvalidArgument(err) || !strings.HasPrefix(err.Error(), "data: not a tar or OCI archive") {
				t.Errorf("%s: %v, want invalid_argument data: not a tar or OCI archive", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got, _ := io.ReadAll(r); !bytes.Equal(got, tc.data) {
			t.Errorf("%s: read %d bytes back, want %d", tc.name, len(got), len(tc.data))
		}
	}
}
