package wire

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// OpDial asks the init to connect to 127.0.0.1:Port in the sandbox's own
// network namespace, for a port boxd publishes on the host:
//
//	dial:  -> request{args: DialArgs}   <- ok | error
//	       then raw bytes both ways, no frames
//
// After the ok frame the connection is a plain byte stream between boxd and
// the sandbox's TCP connection: each side shuts down its write half when
// its source reaches EOF, and closes everything when either direction
// fails. The host sends nothing after the request until it has read the
// reply, so the init's frame reader holds nothing of the stream.
const OpDial = "dial"

// DialArgs are the arguments of OpDial.
type DialArgs struct {
	Port int `json:"port"`
}

// dialSocketBuffer is the send and receive buffer of an OpDial connection
// at both ends: a published port's bulk data crosses the channel in big
// pieces, each a wake-up of the other side. Best effort: the kernel caps it
// at net.core.wmem_max and rmem_max.
const dialSocketBuffer = 4 << 20

// SetDialSocketBuffers sizes c's buffers for an OpDial stream.
func SetDialSocketBuffers(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(dialSocketBuffer)
		_ = uc.SetReadBuffer(dialSocketBuffer)
	}
}

// ValidPort reports whether p is a TCP port a connection can name.
func ValidPort(p int) bool { return p >= 1 && p <= 65535 }

// ReadReplyUnbuffered reads one frame from r without reading past it, so
// that the raw stream following it stays in r. The payload is at most max
// bytes. It is for replies that switch a connection to raw bytes (OpDial).
func ReadReplyUnbuffered(r io.Reader, max int) (Frame, error) {
	var hdr [FrameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return Frame{}, fmt.Errorf("%w: connection closed without a reply", ErrProtocol)
		}
		return Frame{}, err
	}
	t := FrameType(hdr[0])
	n := binary.BigEndian.Uint32(hdr[1:])
	if !t.valid() {
		return Frame{}, fmt.Errorf("%w %d", ErrUnknownFrame, hdr[0])
	}
	if n > uint32(max) {
		return Frame{}, fmt.Errorf("%s frame: %w: %d > %d bytes", t, ErrFrameTooLarge, n, max)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return Frame{}, fmt.Errorf("%s frame: %w", t, err)
	}
	return Frame{Type: t, Payload: p}, nil
}
