//go:build linux

package insandbox

import (
	"fmt"
	"net"

	"github.com/boxd-dev/boxd/agent/wire"
)

// opHandler serves one operation on its connection and reports whether it
// ended well and left the connection clean for another request (which
// matters only for the ops wire.Keepable allows to keep it).
type opHandler func(s *Server, conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) bool

// ops is every operation the init serves, by the name its request frame
// carries (wire.Ops lists the same names; a test holds the two equal).
var ops = map[string]opHandler{
	wire.OpPing:    (*Server).ping,
	wire.OpExec:    (*Server).execOp,
	wire.OpCopyIn:  served((*Server).copyIn),
	wire.OpCopyOut: served((*Server).copyOut),

	wire.OpProcessExec:   served((*Server).processExec),
	wire.OpProcessStart:  served((*Server).processStart),
	wire.OpProcessAttach: served((*Server).processAttach),
	wire.OpProcessList:   served((*Server).processList),
	wire.OpProcessWait:   served((*Server).processWait),
	wire.OpProcessSignal: served((*Server).processSignal),
	wire.OpSessionCreate: served((*Server).sessionCreate),
	wire.OpSessionList:   served((*Server).sessionList),
	wire.OpSessionRemove: served((*Server).sessionRemove),
	wire.OpSessionExec:   served((*Server).sessionExec),

	wire.OpFileWrite:     served((*Server).fileWrite),
	wire.OpFileRead:      served((*Server).fileRead),
	wire.OpFileStat:      served((*Server).fileStat),
	wire.OpFileList:      served((*Server).fileList),
	wire.OpFileMkdir:     served((*Server).fileMkdir),
	wire.OpFileRemove:    served((*Server).fileRemove),
	wire.OpFileRename:    served((*Server).fileRename),
	wire.OpFileChmod:     served((*Server).fileChmod),
	wire.OpFileChown:     served((*Server).fileChown),
	wire.OpFileWatch:     served((*Server).fileWatch),
	wire.OpFileReadLines: served((*Server).fileReadLines),
	wire.OpFileEdit:      served((*Server).fileEdit),
	wire.OpFileGlob:      served((*Server).fileGlob),
	wire.OpFileGrep:      served((*Server).fileGrep),

	wire.OpSetDefaults: served((*Server).setDefaults),
	wire.OpTerminate:   served((*Server).terminate),
	wire.OpDial:        served((*Server).dial),

	wire.OpCheckpointPrepare: served((*Server).checkpointPrepare),
	wire.OpCheckpointResume:  served((*Server).checkpointResume),
}

// served adapts a handler after which the connection always ends.
func served(h func(*Server, net.Conn, *wire.FrameReader, *wire.FrameWriter, *wire.Request)) opHandler {
	return func(s *Server, conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) bool {
		h(s, conn, fr, fw, req)
		return false
	}
}

// serve runs one op and reports whether it ended well and left the
// connection clean for another request.
func (s *Server) serve(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) bool {
	h, ok := ops[req.Op]
	if !ok {
		s.replyError(fw, "request", fmt.Errorf("%w: unknown op %q", wire.ErrInvalid, req.Op))
		return false
	}
	return h(s, conn, fr, fw, req)
}

func (s *Server) ping(_ net.Conn, _ *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) bool {
	if req.Keep {
		return fw.WriteFrame(wire.FrameOK, wire.KeptPayload) == nil
	}
	return fw.WriteFrame(wire.FrameOK, nil) == nil
}

func (s *Server) execOp(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) bool {
	if req.Exec == nil {
		s.replyError(fw, "exec", fmt.Errorf("%w: exec request without exec field", wire.ErrInvalid))
		return false
	}
	return s.exec(conn, fr, fw, req.Exec, req.Keep && wire.Keepable(req))
}
