//go:build linux

package host

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

// hostileInit is serveInit with the frames at hand.
func hostileInit(t *testing.T, play func(fr *wire.FrameReader, fw *wire.FrameWriter)) *Client {
	return serveInit(t, func(c net.Conn, fr *wire.FrameReader) { play(fr, wire.NewFrameWriter(c)) })
}

// readUploadedFile consumes an upload of one file: the batch's tar (its
// one file's entries) up to tar-end.
func readUploadedFile(fr *wire.FrameReader) (wire.UploadItem, int, bool) {
	var item wire.UploadItem
	n := 0
	r := wire.NewFrameDataReader(fr, wire.FrameTar, wire.FrameTarEnd, false)
	defer io.Copy(io.Discard, r) // up to tar-end, as the init reads it
	err := safetar.ReadEntries(r, func(hdr *tar.Header, data io.Reader) error {
		if _, more := hdr.PAXRecords[wire.PAXAppend]; !more {
			item.Path = hdr.Name
		}
		m, err := io.Copy(io.Discard, data)
		n += int(m)
		return err
	})
	return item, n, err == nil && item.Path != ""
}

func oneFile(path, data string) func() (wire.UploadItem, io.Reader, error) {
	done := false
	return func() (wire.UploadItem, io.Reader, error) {
		if done {
			return wire.UploadItem{}, nil, io.EOF
		}
		done = true
		return wire.UploadItem{Path: path}, strings.NewReader(data), nil
	}
}

// An upload's results are bounded by what was uploaded: a hijacked init
// cannot make boxd hold or pass on more results than files, results for
// files never sent, sizes larger than what was sent, or long messages and
// paths of its choosing.
func TestUploadResultsBoundedBySent(t *testing.T) {
	cases := []struct {
		name    string
		play    func(fr *wire.FrameReader, fw *wire.FrameWriter)
		wantErr string
	}{
		{
			name: "flood of results before any file",
			play: func(fr *wire.FrameReader, fw *wire.FrameWriter) {
				for i := 0; i < 1000; i++ {
					if fw.WriteJSON(wire.FrameResult, wire.FileResult{Index: i, Path: "x"}) != nil {
						return
					}
				}
			},
			wantErr: "for a file not sent",
		},
		{
			name: "more results than files",
			play: func(fr *wire.FrameReader, fw *wire.FrameWriter) {
				readUploadedFile(fr)
				_ = fw.WriteJSON(wire.FrameResult, wire.FileResult{Index: 0, Size: 3})
				_ = fw.WriteJSON(wire.FrameResult, wire.FileResult{Index: 1, Size: 3})
				_ = fw.WriteFrame(wire.FrameOK, nil)
			},
			wantErr: "for a file not sent",
		},
		{
			name: "a size larger than sent",
			play: func(fr *wire.FrameReader, fw *wire.FrameWriter) {
				readUploadedFile(fr)
				_ = fw.WriteJSON(wire.FrameResult, wire.FileResult{Index: 0, Size: 1 << 40})
			},
			wantErr: "says 1099511627776 bytes",
		},
		{
			name: "an index out of order",
			play: func(fr *wire.FrameReader, fw *wire.FrameWriter) {
				readUploadedFile(fr)
				_ = fw.WriteJSON(wire.FrameResult, wire.FileResult{Index: 7, Size: 3})
			},
			wantErr: "for file 7 where 0 was next",
		},
		{
			name: "ok before every result",
			play: func(fr *wire.FrameReader, fw *wire.FrameWriter) {
				readUploadedFile(fr)
				_ = fw.WriteFrame(wire.FrameOK, nil)
			},
			wantErr: "0 results for 1 files",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := hostileInit(t, tc.play)
			var got []wire.FileResult
			err := c.UploadFiles(testCtx(t), wire.UploadArgs{}, oneFile("/a", "abc"), func(r wire.FileResult) error {
				got = append(got, r)
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if !errors.Is(err, wire.ErrProtocol) {
				t.Errorf("err = %v, want a protocol error", err)
			}
			if len(got) > 1 {
				t.Errorf("passed on %d results for 1 file", len(got))
			}
		})
	}

	t.Run("path and message are boxd's", func(t *testing.T) {
		c := hostileInit(t, func(fr *wire.FrameReader, fw *wire.FrameWriter) {
			readUploadedFile(fr)
			_ = fw.WriteJSON(wire.FrameResult, wire.FileResult{Index: 0, Size: 3, Path: strings.Repeat("P", 20000),
				Code: strings.Repeat("c", 100), Message: strings.Repeat("m", 30000)})
			_ = fw.WriteFrame(wire.FrameOK, nil)
		})
		var got []wire.FileResult
		err := c.UploadFiles(testCtx(t), wire.UploadArgs{}, oneFile("/a", "abc"), func(r wire.FileResult) error {
			got = append(got, r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Path != "/a" || got[0].Code != wire.CodeInternal || len(got[0].Message) > maxResultMessage+len("…") {
			t.Fatalf("result = %+v (message %d bytes), want path /a, code internal, message cut", got, len(got[0].Message))
		}
	})
}

// batchTar plays a hostile init's copy-out: entries (a header and data
// each) as the batch's tar, in frames, then tar-end.
func batchTar(fw *wire.FrameWriter, entries ...any) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i < len(entries); i += 2 {
		hdr, data := entries[i].(*tar.Header), entries[i+1].(string)
		hdr.Size, hdr.Format = int64(len(data)), tar.FormatPAX
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		_ = tw.WriteHeader(hdr)
		_, _ = tw.Write([]byte(data))
	}
	_ = tw.Close()
	for p := b.Bytes(); len(p) > 0; { // frames of an odd size: entries straddle their edges
		n := min(len(p), 65537)
		_ = fw.WriteFrame(wire.FrameTar, p[:n])
		p = p[n:]
	}
	_ = fw.WriteFrame(wire.FrameTarEnd, nil)
}

func failed(name, code, msg string, appended bool) *tar.Header {
	h := &tar.Header{Name: name, PAXRecords: map[string]string{wire.PAXCode: code, wire.PAXMessage: msg}}
	if appended {
		h.PAXRecords[wire.PAXAppend] = "1"
	}
	return h
}

// A download's per-file results carry the path boxd asked for, the size
// boxd counted and a bounded message, and no file beyond those asked for
// is accepted.
func TestDownloadResultsBounded(t *testing.T) {
	c := hostileInit(t, func(fr *wire.FrameReader, fw *wire.FrameWriter) {
		batchTar(fw,
			failed("/etc/shadow", wire.CodeNotFound, strings.Repeat("m", 50000)+"\xff", false), "",
			&tar.Header{Name: "/b", Mode: 0o644}, "abc",
			failed("/b", strings.Repeat("c", 100), "late", true), "",
			&tar.Header{Name: "/extra"}, "x")
	})
	var got []wire.FileResult
	err := c.DownloadFiles(testCtx(t), wire.DownloadArgs{Paths: []string{"/a", "b"}}, DownloadHandler{Done: func(r wire.FileResult) error {
		got = append(got, r)
		return nil
	}})
	if err == nil || !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("err = %v, want a protocol error for the file beyond those asked for", err)
	}
	if len(got) != 2 || got[0].Path != "/a" || got[0].Code != wire.CodeNotFound || len(got[0].Message) > maxResultMessage+len("…") ||
		!utf8.ValidString(got[0].Message) || got[1].Path != "b" || got[1].Size != 3 || got[1].Code != wire.CodeInternal {
		t.Fatalf("results = %+v, want /a not found with its message cut, b internal after 3 bytes", got)
	}
}

// A download's tar in forms an honest init never writes is refused as a
// protocol error; many files sent in one write, entries straddling the
// frames' edges, arrive whole and in order, described as the init said.
func TestDownloadTarHostile(t *testing.T) {
	const files = 1000
	mtime := time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC)
	download := func(last ...any) (starts, data int, err error) {
		c := serveInit(t, func(conn net.Conn, _ *wire.FrameReader) {
			var all bytes.Buffer
			var entries []any
			for i := range files - 1 {
				entries = append(entries, &tar.Header{Name: fmt.Sprintf("/f%d", i), Mode: 0o644, ModTime: mtime, Uid: 1000},
					strings.Repeat(string(rune('a'+i%26)), 1+i%300))
			}
			w := wire.NewFrameWriter(&all)
			batchTar(w, append(entries, last...)...)
			_, _ = conn.Write(all.Bytes())
		})
		paths := make([]string, files)
		for i := range paths {
			paths[i] = fmt.Sprintf("f%d", i)
		}
		err = c.DownloadFiles(testCtx(t), wire.DownloadArgs{Paths: paths}, DownloadHandler{
			Start: func(i int, fi wire.FileStat) error {
				if i < files-1 && (fi.Path != "/"+paths[i] || fi.Name != paths[i] || fi.Mode != 0o644 || !fi.Mtime.Equal(mtime) || fi.UID != 1000 || fi.Size != int64(1+i%300)) {
					return fmt.Errorf("file %d: start %+v", i, fi)
				}
				starts++
				return nil
			},
			Data: func(i int, p []byte) error {
				if i < files-1 && (len(p) != 1+i%300 || p[0] != byte('a'+i%26)) {
					return fmt.Errorf("file %d: %d bytes of %d", i, len(p), p[0])
				}
				data++
				return nil
			},
		})
		return starts, data, err
	}
	if starts, data, err := download(&tar.Header{Name: "/f999", Mode: 0o644, ModTime: mtime, Uid: 1000}, strings.Repeat("x", 1+(files-1)%300)); err != nil || starts != files || data != files {
		t.Fatalf("%d starts, %d data, %v; want %d of each", starts, data, err, files)
	}
	for name, last := range map[string][]any{
		"a directory":         {&tar.Header{Name: "/d", Typeflag: tar.TypeDir}, ""},
		"a symlink":           {&tar.Header{Name: "/l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}, ""},
		"a failure with data": {failed("/x", wire.CodeNotFound, "m", false), "data"},
		"a bad size":          {&tar.Header{Name: "/f", PAXRecords: map[string]string{wire.PAXSize: "-1"}}, ""},
		"a long name":         {&tar.Header{Name: "/" + strings.Repeat("n", safetar.MaxNameLen)}, ""},
		"a huge owner":        {&tar.Header{Name: "/f", Uid: 1 << 40}, ""},
		"one file too few":    {},
		"one too many":        {&tar.Header{Name: "/f"}, "", &tar.Header{Name: "/g"}, ""},
	} {
		if _, _, err := download(last...); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("last entry %s: %v, want a protocol error", name, err)
		}
	}
}

// Data continuing no file is refused.
func TestDownloadAppendWithoutFile(t *testing.T) {
	c := hostileInit(t, func(fr *wire.FrameReader, fw *wire.FrameWriter) {
		batchTar(fw, &tar.Header{Name: "/a", PAXRecords: map[string]string{wire.PAXAppend: "1"}}, "x")
	})
	err := c.DownloadFiles(testCtx(t), wire.DownloadArgs{Paths: []string{"/a"}}, DownloadHandler{})
	if !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("err = %v, want a protocol error", err)
	}
}
