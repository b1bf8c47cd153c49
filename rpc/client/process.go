package client

import (
	"context"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// NewProcess returns a ProcessService client that talks HTTP/2 over the
// Unix socket at path (Exec and Attach are bidirectional streams, which
// need HTTP/2). It does not ask for gzip: on a local socket compressing
// every keystroke and output chunk costs more than it saves.
func NewProcess(path string) boxdv1connect.ProcessServiceClient {
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
	return boxdv1connect.NewProcessServiceClient(&http.Client{Transport: tr}, "http://boxd",
		connect.WithReadMaxBytes(MaxMessageBytes), connect.WithSendMaxBytes(MaxMessageBytes),
		connect.WithAcceptCompression("gzip", nil, nil))
}
