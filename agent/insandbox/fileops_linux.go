//go:build linux

package insandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/boxd-dev/boxd/agent/wire"
	"github.com/boxd-dev/boxd/internal/safetar"
)

func (s *Server) stat(fw *wire.FrameWriter, path string) {
	p, err := s.resolve(path)
	if err != nil {
		s.replyError(fw, "stat "+path, err)
		return
	}
	fi, err := fsStatPath(p, false)
	if err != nil {
		s.replyError(fw, "stat "+path, fsFail("stat", p, err))
		return
	}
	fw.WriteJSON(wire.FrameResult, wire.FileInfo{
		Name: fi.Name, Size: fi.Size, Mode: fi.FileMode(), IsDir: fi.Type == wire.FileTypeDir,
		Mtime: fi.Mtime, LinkTarget: fi.LinkTarget,
	})
}

// copyOut sends a tar of path whose single top-level entry is base(path).
func (s *Server) copyOut(conn net.Conn, fw *wire.FrameWriter, path string) {
	p, err := s.resolve(path)
	if err != nil {
		s.replyError(fw, "copy-out "+path, err)
		return
	}
	if p == "/" {
		s.replyError(fw, "copy-out "+path, fmt.Errorf("%w: cannot copy out /: a tar needs a top-level name", wire.ErrInvalid))
		return
	}
	if _, err := os.Lstat(p); err != nil {
		s.replyError(fw, "copy-out "+path, err)
		return
	}
	wire.SetFileSocketBuffer(conn)
	buf := fileReadBufs.Get().(*[wire.FileChunk]byte)
	defer fileReadBufs.Put(buf)
	bw := &safetar.BatchWriter{Max: wire.FileChunk, Buf: buf[:0], Send: func(b []byte) error { return fw.WriteFrame(wire.FrameTar, b) }}
	err = safetar.Write(bw, p, filepath.Base(p))
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		// The host discards the partial tar when an error frame ends it.
		s.replyError(fw, "copy-out "+path, err)
		return
	}
	fw.WriteFrame(wire.FrameTarEnd, nil)
}
