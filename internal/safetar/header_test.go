package safetar

import (
	"archive/tar"
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
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

// AppendHeader's direct blocks are archive/tar's for every plain header,
// and one with sub-second mtimes and boxd's PAX records reads back as the
// same entry; anything else is archive/tar's own.
func TestAppendHeader(t *testing.T) {
	mt := time.Unix(1764412345, 0)
	for _, hdr := range []tar.Header{
		{Typeflag: tar.TypeReg, Name: "a/b", Mode: 0o4755, Uid: 1000, Gid: 2000, Size: 7, ModTime: mt},
		{Typeflag: tar.TypeDir, Name: "a/", Mode: 0o1777, ModTime: mt},
		{Typeflag: tar.TypeSymlink, Name: "a/l", Linkname: "../x", Mode: 0o777, ModTime: mt},
	} {
		got, err := AppendHeader(nil, &hdr)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		h := hdr
		h.Format = tar.FormatUSTAR
		if err := tar.NewWriter(&want).WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: block differs from archive/tar's", hdr.Name)
		}
	}
	for _, hdr := range []tar.Header{
		{Typeflag: tar.TypeReg, Name: "/w/f", Mode: 0o644, Uid: 5, Size: 3, ModTime: time.Unix(1764412345, 120000000),
			PAXRecords: map[string]string{"BOXD.size": "9", "BOXD.message": "a\nb=c"}},
		{Typeflag: tar.TypeReg, Name: "/w/g", Size: 3, ModTime: time.Unix(1, 1)},
		{Typeflag: tar.TypeReg, Name: strings.Repeat("n", 200), Size: 3, ModTime: time.Unix(1, 5), Format: tar.FormatPAX},
		{Typeflag: tar.TypeReg, Name: "x", Size: 3, PAXRecords: map[string]string{"path": "/etc/shadow"}},
		{Typeflag: tar.TypeReg, Name: "x", Size: 3, Uid: 1 << 30, Format: tar.FormatPAX},
	} {
		b, err := AppendHeader(nil, &hdr)
		if err != nil {
			t.Fatal(err)
		}
		stream := append(append(append(b, "abc"...), Pad(3)...), Trailer()...)
		tr := tar.NewReader(bytes.NewReader(stream))
		got, err := tr.Next()
		if err != nil {
			t.Fatalf("%.20s: read back: %v", hdr.Name, err)
		}
		// A "path" record is archive/tar's to handle: the header's Name wins.
		if got.Name != hdr.Name || hdr.ModTime.IsZero() != (got.ModTime.Unix() == 0) || got.Size != 3 || got.Uid != hdr.Uid || got.Mode != hdr.Mode || (!hdr.ModTime.IsZero() && !got.ModTime.Equal(hdr.ModTime)) {
			t.Errorf("%.20s: read back %+v", hdr.Name, got)
		}
		for k, v := range hdr.PAXRecords {
			if k != "path" && got.PAXRecords[k] != v {
				t.Errorf("%.20s: record %s = %q, want %q", hdr.Name, k, got.PAXRecords[k], v)
			}
		}
	}
}

// A PAX record's length counts its own digits, across a power of ten.
func TestAppendRecordLength(t *testing.T) {
	for n := 1; n < 2000; n++ {
		r := appendRecord(nil, "BOXD.k", strings.Repeat("v", n))
		sp := bytes.IndexByte(r, ' ')
		if l, _ := strconv.Atoi(string(r[:sp])); l != len(r) {
			t.Fatalf("value of %d bytes: record says %d, is %d", n, l, len(r))
		}
	}
}
