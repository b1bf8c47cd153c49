package wire

import "net"

// fileSocketBuffer is the send buffer of a connection that carries file
// data, at whichever end sends it. The default (208 KiB) cuts every
// FileChunk frame into several writes, each a wake-up of the reader.
const fileSocketBuffer = 1 << 20

// SetFileSocketBuffer gives c the send buffer of a file-data connection.
// It is best effort: the kernel caps the size at net.core.wmem_max.
func SetFileSocketBuffer(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(fileSocketBuffer)
	}
}
