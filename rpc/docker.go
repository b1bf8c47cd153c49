//go:build linux

package rpc

import (
	"context"
	"net"
)

// CallerContext identifies a connection's caller as the API's socket does
// (SO_PEERCRED, the admin group): for boxd's other endpoints on Unix
// sockets, such as the Docker Engine API (internal/dockerapi).
func (s *Server) CallerContext(ctx context.Context, c net.Conn) context.Context {
	return s.callerContext(ctx, c)
}
