//go:build !linux

package wire

import (
	"io"
	"net"
)

func spliceCopy(dst, src net.Conn) (int64, error) { return io.Copy(dst, src) }
