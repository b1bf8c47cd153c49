// Package client is the client side of boxd's API: what boxctl and Go
// programs use to reach boxd. It stays free of the daemon's dependencies so
// a client binary starts fast.
package client

import (
	"context"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// DefaultSocket is where boxd listens unless told otherwise.
const DefaultSocket = "/run/boxd/boxd.sock"

// MaxMessageBytes bounds any single message either side accepts; bulk data
// travels as a stream of smaller messages.
const MaxMessageBytes = 8 << 20

// New returns an API client that talks HTTP/2 over the Unix socket at path
// (client and bidirectional streams need HTTP/2).
func New(path string) boxdv1connect.SandboxServiceClient {
	proto := new(http.Protocols)
	proto.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		Protocols:           proto,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	return boxdv1connect.NewSandboxServiceClient(&http.Client{Transport: tr}, "http://boxd",
		connect.WithReadMaxBytes(MaxMessageBytes), connect.WithSendMaxBytes(MaxMessageBytes))
}
