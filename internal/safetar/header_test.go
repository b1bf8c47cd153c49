package safetar

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
)

// AppendFileHeader's direct USTAR block is byte for byte what archive/tar
// writes, and every header it makes reads back as the same entry.
func TestAppendFileHeader(t *testing.T) {
	cases := []struct {
		name       string
		mode, size int64
		pax        map[string]string
		direct     bool
	}{
		{"up/a.txt", 0o644, 5, nil, true},
		{"/workspace/t1/d0/f1", 0o1000000, 0, nil, true},
		{strings.Repeat("n", 100), 0o7777, 1 << 20, nil, true},
		{strings.Repeat("n", 101), 0o600, 1, nil, false},
		{"héllo", 0o600, 3, nil, false},
		{"", 0o600, 0, nil, false},
		{"x", 0o600, 2, map[string]string{"BOXD.append": "1"}, false},
		{"x", 1 << 30, 2, nil, false},
	}
	for _, tc := range cases {
		got, err := AppendFileHeader([]byte("prefix"), tc.name, tc.mode, tc.size, tc.pax)
		if err != nil {
			t.Fatalf("%q: %v", tc.name, err)
		}
		if string(got[:6]) != "prefix" {
			t.Fatalf("%q: dst not appended to", tc.name)
		}
		got = got[6:]
		if tc.direct {
			var want bytes.Buffer
			tw := tar.NewWriter(&want)
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: tc.name, Mode: tc.mode, Size: tc.size, Format: tar.FormatUSTAR}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%q: block differs from archive/tar's:\n%q\n%q", tc.name, got, want.Bytes())
			}
		}
		data := bytes.Repeat([]byte("d"), int(tc.size))
		stream := append(append(append(got, data...), Pad(tc.size)...), Trailer()...)
		tr := tar.NewReader(bytes.NewReader(stream))
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("%q: read back: %v", tc.name, err)
		}
		n, _ := io.Copy(io.Discard, tr)
		if hdr.Name != tc.name || hdr.Mode != tc.mode || hdr.Size != tc.size || n != tc.size || hdr.Typeflag != tar.TypeReg ||
			hdr.PAXRecords["BOXD.append"] != tc.pax["BOXD.append"] {
			t.Errorf("%q: read back %+v (%d bytes)", tc.name, hdr, n)
		}
		if _, err := tr.Next(); err != io.EOF {
			t.Errorf("%q: after the entry: %v", tc.name, err)
		}
	}
}
