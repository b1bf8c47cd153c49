package wire

import (
	"io"
	"net"
	"sync"
)

// Splice joins two stream connections, as both ends of an OpDial do after
// the handshake: bytes are copied both ways until each direction's source
// reaches EOF, which is passed on as a shutdown of the other side's write
// half (a half-close is kept, so a client may send a request, shut down
// its sending side and still read the answer). A direction that fails (a
// reset, a write to a peer that is gone) closes both connections at once,
// so neither side is left waiting. Splice closes both before it returns.
//
// Each direction moves data with splice(2) through a kernel pipe of its
// own (spliceCopy): the data never enters user space, and each direction
// buffers at most that one pipe (1 MiB) besides the sockets' own buffers,
// whatever the peer sends or withholds. Connections that are not sockets
// (tests' pipes) fall back to io.Copy's 32 KiB buffer.
func Splice(a, b net.Conn) (aToB, bToA int64) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			a.Close()
			b.Close()
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		aToB = copyHalf(b, a, closeBoth)
	}()
	bToA = copyHalf(a, b, closeBoth)
	<-done
	closeBoth()
	return aToB, bToA
}

type closeWriter interface{ CloseWrite() error }

// copyHalf copies src to dst, then passes src's EOF on; on failure it calls
// abort.
func copyHalf(dst, src net.Conn, abort func()) int64 {
	n, err := spliceCopy(dst, src)
	if err == nil {
		if cw, ok := dst.(closeWriter); ok {
			err = cw.CloseWrite()
		} else {
			err = io.ErrClosedPipe
		}
	}
	if err != nil {
		abort()
	}
	return n
}
