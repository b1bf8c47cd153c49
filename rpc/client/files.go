package client

import (
	"context"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// NewFiles returns a FileService client that talks HTTP/2 over the Unix
// socket at path. It is tuned for bulk data: HTTP/2 frames of up to 1 MiB
// (Go's default of 16 KiB caps a stream from boxd at a few hundred MiB/s)
// and no gzip, which on a local socket costs far more CPU than it saves.
func NewFiles(path string) boxdv1connect.FileServiceClient {
	return boxdv1connect.NewFileServiceClient(&http.Client{Transport: BulkTransport(path)}, "http://boxd",
		connect.WithReadMaxBytes(MaxMessageBytes), connect.WithSendMaxBytes(MaxMessageBytes),
		connect.WithAcceptCompression("gzip", nil, nil))
}

// BulkTransport is HTTP/2 without TLS over the Unix socket at path, with
// large frames and receive windows: what moving files needs. The windows
// bound what boxd can send ahead of the reader (per stream and in all).
func BulkTransport(path string) *http.Transport {
	proto := new(http.Protocols)
	proto.SetUnencryptedHTTP2(true)
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		Protocols: proto,
		HTTP2: &http.HTTP2Config{
			MaxReadFrameSize:              1 << 20,
			MaxReceiveBufferPerStream:     8 << 20,
			MaxReceiveBufferPerConnection: 32 << 20,
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}
