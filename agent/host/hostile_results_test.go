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

// A download's per-file results carry the path boxd asked for and a
// bounded message, and no result beyond the files asked for is accepted.
func TestDownloadResultsBounded(t *testing.T) {
	c := hostileInit(t, func(fr *wire.FrameReader, fw *wire.FrameWriter) {
		_ = fw.WriteJSON(wire.FrameResult, wire.DownloadMark{Index: 0, Done: &wire.FileResult{Path: "/etc/shadow", Code: wire.CodeNotFound, Message: strings.Repeat("m", 50000)}})
		_ = fw.WriteJSON(wire.FrameResult, wire.DownloadMark{Index: 1, Done: &wire.FileResult{Path: "extra"}})
		_ = fw.WriteFrame(wire.FrameOK, nil)
	})
	var got []wire.FileResult
	err := c.DownloadFiles(testCtx(t), wire.DownloadArgs{Paths: []string{"/a"}}, DownloadHandler{Done: func(r wire.FileResult) error {
		got = append(got, r)
		return nil
	}})
	if err == nil || !errors.Is(err, wire.ErrProtocol) {
		t.Fatalf("err = %v, want a protocol error for the result beyond the files asked for", err)
	}
	if len(got) != 1 || got[0].Path != "/a" || len(got[0].Message) > maxResultMessage+len("…") {
		t.Fatalf("results = %+v, want one for /a with its message cut", got)
	}
}

// A download's marks in any JSON form decode as encoding/json decodes
// them (the fast path takes only the init's own form), a malformed one is
// refused, and many files sent in one write, frames straddling the read
// buffer's edges, arrive whole and in order.
func TestDownloadMarksInAnyForm(t *testing.T) {
	const files = 3000
	download := func(last string) (starts, data int, err error) {
		c := serveInit(t, func(conn net.Conn, _ *wire.FrameReader) {
			var all bytes.Buffer
			w := wire.NewFrameWriter(&all)
			for i := range files {
				start := fmt.Sprintf(`{"index":%d,"start":{"path":"/f%d","name":"f","type":"file","size":3,"mode":420,"uid":0,"gid":0,"mtime":"2026-01-01T00:00:00Z"}}`, i, i)
				if i%3 == 1 { // white space, keys out of order, an escape: encoding/json's to read
					start = fmt.Sprintf(`{ "start" : {"mtime":"2026-01-01T00:00:00Z","path":"\u002ff%d","name":"f","type":"file","size":3,"mode":420,"uid":0,"gid":0}, "index" : %d }`, i, i)
				}
				done := fmt.Sprintf(`{"index":%d,"done":{"index":%d,"path":"/f%d","size":%d}}`, i, i, i, 1+i%300)
				if i == files-1 {
					done = last
				}
				_ = w.WriteFrame(wire.FrameResult, []byte(start))
				_ = w.WriteFrame(wire.FrameFileData, bytes.Repeat([]byte{byte(i)}, 1+i%300))
				_ = w.WriteFrame(wire.FrameResult, []byte(done))
			}
			_ = w.WriteFrame(wire.FrameOK, nil)
			_, _ = conn.Write(all.Bytes())
		})
		paths := make([]string, files)
		for i := range paths {
			paths[i] = fmt.Sprintf("/f%d", i)
		}
		err = c.DownloadFiles(testCtx(t), wire.DownloadArgs{Paths: paths}, DownloadHandler{
			Start: func(i int, fi wire.FileStat) error {
				if fi.Path != paths[i] || fi.Mode != 0o644 || fi.Mtime.Year() != 2026 {
					return fmt.Errorf("file %d: start %+v", i, fi)
				}
				starts++
				return nil
			},
			Data: func(i int, p []byte) error {
				if len(p) != 1+i%300 || p[0] != byte(i) || p[len(p)-1] != byte(i) {
					return fmt.Errorf("file %d: %d bytes of %d", i, len(p), p[0])
				}
				data++
				return nil
			},
		})
		return starts, data, err
	}
	if starts, data, err := download(fmt.Sprintf(`{"index":%d,"done":{"index":0,"path":"x","size":1}}`, files-1)); err != nil || starts != files || data != files {
		t.Fatalf("%d starts, %d data, %v; want %d of each", starts, data, err, files)
	}
	for _, bad := range []string{`{"index":2999,"done":{"index":0,"path":"x","size":1}`, `{"index":2999,"done":{"size":"x"}}`, `{"index":-0x1}`} {
		if _, _, err := download(bad); !errors.Is(err, wire.ErrProtocol) {
			t.Errorf("last mark %s: %v, want a protocol error", bad, err)
		}
	}
}
