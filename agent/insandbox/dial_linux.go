//go:build linux

package insandbox

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/boxd-dev/boxd/agent/wire"
)

// dialTimeout bounds the connect to a sandbox port. On loopback a port
// either accepts or refuses at once; only a full accept backlog waits.
const dialTimeout = 10 * time.Second

// dial serves OpDial: it connects to 127.0.0.1:port in the sandbox's
// network namespace (the init's own: it is PID 1 of the sandbox) and then
// joins that connection with boxd's, as raw bytes. The sandbox can only
// ever be reached on its own loopback this way; which host address and
// port lead here is boxd's choice, never the sandbox's.
func (s *Server) dial(conn net.Conn, fr *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var args wire.DialArgs
	if err := json.Unmarshal(req.Args, &args); err != nil {
		s.replyError(fw, "dial", fmt.Errorf("%w: malformed dial arguments: %v", wire.ErrInvalid, err))
		return
	}
	if !wire.ValidPort(args.Port) {
		s.replyError(fw, "dial", fmt.Errorf("%w: port %d is outside 1-65535", wire.ErrInvalid, args.Port))
		return
	}
	if fr.Buffered() > 0 {
		// boxd waits for the reply before it sends stream bytes.
		s.replyError(fw, "dial", fmt.Errorf("%w: data after the dial request", wire.ErrInvalid))
		return
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(args.Port))
	tc, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		// Not logged: a port nothing listens on is the sandbox's business.
		fw.WriteJSON(wire.FrameError, wire.ToRemoteError(fmt.Errorf("connect to %s in the sandbox: %w", addr, err)))
		return
	}
	wire.SetDialSocketBuffers(conn)
	if err := fw.WriteFrame(wire.FrameOK, nil); err != nil {
		tc.Close()
		return
	}
	wire.Splice(conn, tc)
}
