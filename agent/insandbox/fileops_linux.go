//go:build linux

package insandbox

import (
	"github.com/boxd-dev/boxd/agent/wire"
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
