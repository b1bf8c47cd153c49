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

// baseURL is what requests are addressed to: the host part is ignored, the
// socket is the address.
const baseURL = "http://boxd"

// MaxMessageBytes bounds any single message either side accepts; bulk data
// travels as a stream of smaller messages.
const MaxMessageBytes = 8 << 20

// New returns a SandboxService client for the Unix socket at path.
func New(path string) boxdv1connect.SandboxServiceClient {
	hc := httpClient(path)
	return boxdv1connect.NewSandboxServiceClient(hc, baseURL, options(hc)...)
}

// NewProcess returns a ProcessService client for the Unix socket at path.
func NewProcess(path string) boxdv1connect.ProcessServiceClient {
	hc := httpClient(path)
	return boxdv1connect.NewProcessServiceClient(hc, baseURL, options(hc)...)
}

// NewFiles returns a FileService client for the Unix socket at path.
func NewFiles(path string) boxdv1connect.FileServiceClient {
	hc := httpClient(path)
	return boxdv1connect.NewFileServiceClient(hc, baseURL, options(hc)...)
}

// NewRegistry returns a RegistryService client for the Unix socket at path.
func NewRegistry(path string) boxdv1connect.RegistryServiceClient {
	hc := httpClient(path)
	return boxdv1connect.NewRegistryServiceClient(hc, baseURL, options(hc)...)
}

func httpClient(path string) *http.Client {
	return &http.Client{Transport: bufferedBodies{Transport(path)}}
}

// options: bounded messages, no gzip, which on a local socket costs far
// more CPU than it saves, for keystrokes and file chunks alike, and
// received file data in pooled buffers (see ChunkCodec).
func options(hc *http.Client) []connect.ClientOption {
	return []connect.ClientOption{
		connect.WithInterceptors(uploadWarmer{hc}),
		connect.WithReadMaxBytes(MaxMessageBytes), connect.WithSendMaxBytes(MaxMessageBytes),
		connect.WithAcceptCompression("gzip", nil, nil),
		connect.WithCodec(ChunkCodec{}),
	}
}

// HTTP/2 settings, the same on both ends (boxd's server uses them too).
// The windows bound what one side can send ahead of the other's reader.
const (
	MaxFrameBytes     = 1 << 20
	StreamWindowBytes = 8 << 20
	ConnWindowBytes   = 32 << 20
)

// SocketBufferBytes is the send buffer of the API's connections, at both
// ends. The kernel's default (208 KiB) splits every 512 KiB DATA frame
// into several writes and the reader's side into many wake-ups, each
// a few microseconds of scheduler work on both sides.
const SocketBufferBytes = 1 << 20

// SetSocketBuffer gives a Unix connection SocketBufferBytes of send
// buffer (best effort: the kernel caps it at net.core.wmem_max).
func SetSocketBuffer(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(SocketBufferBytes)
	}
}

// Transport is HTTP/2 without TLS over the Unix socket at path: client and
// bidirectional streams need HTTP/2. Frames of up to 1 MiB and large
// receive windows are what moving files needs (Go's default 16 KiB frames
// cap a stream from boxd at a few hundred MiB/s); the windows bound what
// boxd can send ahead of the reader.
func Transport(path string) *http.Transport {
	proto := new(http.Protocols)
	proto.SetUnencryptedHTTP2(true)
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", path)
			if err == nil {
				SetSocketBuffer(c)
			}
			return c, err
		},
		Protocols: proto,
		HTTP2: &http.HTTP2Config{
			MaxReadFrameSize:              MaxFrameBytes,
			MaxReceiveBufferPerStream:     StreamWindowBytes,
			MaxReceiveBufferPerConnection: ConnWindowBytes,
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}

// NewEvents returns an EventService client for the Unix socket at path.
func NewEvents(path string) boxdv1connect.EventServiceClient {
	hc := httpClient(path)
	return boxdv1connect.NewEventServiceClient(hc, baseURL, options(hc)...)
}

// NewPool returns a PoolService client for the Unix socket at path.
func NewPool(path string) boxdv1connect.PoolServiceClient {
	hc := httpClient(path)
	return boxdv1connect.NewPoolServiceClient(hc, baseURL, options(hc)...)
}

// NewVolumes returns a VolumeService client for the Unix socket at path.
func NewVolumes(path string) boxdv1connect.VolumeServiceClient {
	hc := httpClient(path)
	return boxdv1connect.NewVolumeServiceClient(hc, baseURL, options(hc)...)
}
