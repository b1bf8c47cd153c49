//go:build linux

package host

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// readBatch reads every header the init's writer makes, fast path or
// archive/tar's, as archive/tar reads it.
func TestReadBatchReadsWhatTheInitWrites(t *testing.T) {
	hdrs := []*tar.Header{
		{Typeflag: tar.TypeReg, Name: "/w/a", Mode: 0o644, Uid: 1000, Gid: 1000, ModTime: time.Unix(1764412345, 123456789), Format: tar.FormatPAX},
		{Typeflag: tar.TypeReg, Name: "/w/b", Mode: 0o600, ModTime: time.Unix(1764412345, 0), Format: tar.FormatPAX,
			PAXRecords: map[string]string{wire.PAXSize: "5000000"}},
		{Typeflag: tar.TypeReg, Name: "/w/" + strings.Repeat("é", 100), Mode: 0o644, ModTime: time.Unix(1, 500), Format: tar.FormatPAX},
		{Typeflag: tar.TypeReg, Name: "/w/big-owner", Uid: 1 << 30, Gid: 7, ModTime: time.Unix(-86400*365*10, 250000000), Format: tar.FormatPAX},
		{Typeflag: tar.TypeReg, Name: "/w/x", Format: tar.FormatPAX,
			PAXRecords: map[string]string{wire.PAXAppend: "1", wire.PAXCode: wire.CodeNotFound, wire.PAXMessage: "no\nsuch = file"}},
	}
	var buf bytes.Buffer
	tw := safetar.NewWriter(&buf)
	for i, h := range hdrs {
		if err := tw.Entry(h, bytes.Repeat([]byte{byte('a' + i)}, i*300)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	n := 0
	err := readBatch(bytes.NewReader(buf.Bytes()), func(e *batchFile, data io.Reader) error {
		want, err := tr.Next()
		if err != nil {
			return err
		}
		got, _ := io.ReadAll(data)
		wantData, _ := io.ReadAll(tr)
		if e.Name != want.Name || e.Mode != want.Mode || e.UID != int64(want.Uid) || e.GID != int64(want.Gid) || e.Size != want.Size ||
			!e.ModTime.Equal(want.ModTime) || !bytes.Equal(got, wantData) {
			t.Errorf("entry %d: %+v, archive/tar: %+v", n, e, want)
		}
		for k, v := range want.PAXRecords {
			if strings.HasPrefix(k, "BOXD.") && e.Records[k] != v {
				t.Errorf("entry %d: record %s = %q, want %q", n, k, e.Records[k], v)
			}
		}
		n++
		return nil
	})
	if err != nil || n != len(hdrs) {
		t.Fatalf("%d entries, %v", n, err)
	}
}

// Anything but the batch's form is a protocol error, never a panic or an
// entry made up.
func TestReadBatchRefusesOtherForms(t *testing.T) {
	entry := func(h *tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(make([]byte, h.Size))
		tw.Close()
		return b.Bytes()
	}
	good := entry(&tar.Header{Typeflag: tar.TypeReg, Name: "/a", Size: 3, ModTime: time.Unix(5, 5)})
	// good is a PAX header, its records, the entry's block, its data.
	corrupt := func(off int, c byte) []byte {
		b := bytes.Clone(good)
		b[off] = c
		return b
	}
	retyped := func(typ byte) []byte { // a valid checksum for another type
		b := corrupt(1024+156, typ)
		blk := b[1024:1536]
		copy(blk[148:156], "        ")
		sum := 0
		for _, c := range blk {
			sum += int(c)
		}
		copy(blk[148:155], fmt.Sprintf("%06o\x00", sum))
		return b
	}
	cases := map[string][]byte{
		"no end marker":    good[:len(good)-1024],
		"cut in the data":  good[:1536+1],
		"one zero block":   append(bytes.Clone(good[:len(good)-1024]), make([]byte, 512)...),
		"bad checksum":     corrupt(1024+10, 'z'),
		"bad PAX record":   corrupt(512+1, 'x'),
		"a directory":      entry(&tar.Header{Typeflag: tar.TypeDir, Name: "/d/"}),
		"a symlink":        entry(&tar.Header{Typeflag: tar.TypeSymlink, Name: "/l", Linkname: "/etc"}),
		"a hard link":      entry(&tar.Header{Typeflag: tar.TypeLink, Name: "/l", Linkname: "/etc"}),
		"an xattr":         entry(&tar.Header{Typeflag: tar.TypeReg, Name: "/s", PAXRecords: map[string]string{"SCHILY.xattr.user.a": "1"}}),
		"an unknown key":   entry(&tar.Header{Typeflag: tar.TypeReg, Name: "/s", PAXRecords: map[string]string{"BOXD.other": "1"}}),
		"a huge PAX block": entry(&tar.Header{Typeflag: tar.TypeReg, Name: "/" + strings.Repeat("n", maxPAXBlock)}),
		"GNU long name":    retyped('L'),
		"GNU sparse":       retyped('S'),
	}
	for name, stream := range cases {
		entries := 0
		err := readBatch(bytes.NewReader(stream), func(*batchFile, io.Reader) error { entries++; return nil })
		if !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("%s: %v (%d entries), want a protocol error", name, err, entries)
		}
	}
	for _, v := range []string{"", "x", "1.x", "+1", "--1", "1.5e3"} {
		if _, err := parsePAXTime(v); err == nil {
			t.Errorf("mtime %q parsed", v)
		}
	}
	for v, want := range map[string]time.Time{"12": time.Unix(12, 0), "1.25": time.Unix(1, 250000000), "-1.5": time.Unix(-1, -500000000),
		"3.1234567891": time.Unix(3, 123456789)} {
		if got, err := parsePAXTime(v); err != nil || !got.Equal(want) {
			t.Errorf("mtime %q = %v %v, want %v", v, got, err, want)
		}
	}
}
