// Package apiwire is how boxd's API travels over its Unix socket, at both
// ends: the limits and HTTP/2 settings the daemon's server and the Go
// clients share, the codec that puts file data in pooled buffers, the
// buffering of streamed bodies, and the client's HTTP transport. The
// daemon (rpc), boxctl's client (internal/rpcclient) and the Go SDK
// (sdk/go/boxd) all import it, so the two ends cannot drift apart. It is
// a module of its own, needing only connect, protobuf and the generated
// API code (rpc/gen), so the SDK can use it without the daemon's
// dependencies.
package apiwire

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"
)

// DefaultSocket is where boxd listens unless told otherwise.
const DefaultSocket = "/run/boxd/boxd.sock"

// BaseURL is what requests are addressed to: the host part is ignored, the
// socket is the address.
const BaseURL = "http://boxd"

// MaxMessageBytes bounds any single message either side accepts; bulk data
// travels as a stream of smaller messages (ChunkBytes each).
const MaxMessageBytes = 8 << 20

// StreamChunkBytes is the most data one message of a stream carries where
// latency matters as much as throughput: command output (ExecStream,
// processes) from boxd, and boxctl's uploads to it. File data the clients
// move in bulk goes in messages of ChunkBytes.
const StreamChunkBytes = 256 << 10

// HTTP/2 settings, the same on both ends. The windows bound what one side
// can send ahead of the other's reader.
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

// HTTPClient is the HTTP client for the socket at path: Transport, with
// streamed answers read in big pieces and an answer cut off by boxd's end
// reported as unavailable (see bufferedBodies).
func HTTPClient(path string) *http.Client {
	return &http.Client{Transport: bufferedBodies{Transport(path)}}
}

// ClientOver is the HTTP client over rt, another transport than the
// socket's (a TCP listener's): streamed answers read in big pieces and an
// answer cut off by boxd's end reported as unavailable, as HTTPClient's.
func ClientOver(rt http.RoundTripper) *http.Client {
	return &http.Client{Transport: bufferedBodies{rt}}
}

// RemoteClient is the HTTP client of a TCP listener of boxd's at base
// (https://HOST:PORT, or http:// for a plain loopback one): HTTP/2 (over
// TLS trusting roots, nil: the system's), the socket's frame and window
// sizes, and token presented on every request.
func RemoteClient(base *url.URL, token string, roots *x509.CertPool) *http.Client {
	return RemoteClientTLS(base, token, &tls.Config{RootCAs: roots})
}

// RemoteClientTLS is RemoteClient with the TLS settings in cfg (a client
// certificate for a listener that requires one, among them); with no
// token, calls present none, and the certificate names the caller.
func RemoteClientTLS(base *url.URL, token string, cfg *tls.Config) *http.Client {
	cfg = cfg.Clone()
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	proto := new(http.Protocols)
	proto.SetHTTP2(true)
	proto.SetUnencryptedHTTP2(base.Scheme == "http")
	tr := &http.Transport{
		TLSClientConfig:     cfg,
		Protocols:           proto,
		TLSHandshakeTimeout: 10 * time.Second,
		HTTP2: &http.HTTP2Config{
			MaxReadFrameSize:              MaxFrameBytes,
			MaxReceiveBufferPerStream:     StreamWindowBytes,
			MaxReceiveBufferPerConnection: ConnWindowBytes,
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	if token == "" {
		return ClientOver(tr)
	}
	return ClientOver(bearer{"Bearer " + token, tr})
}

// bearer adds the token to every request.
type bearer struct {
	value string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", b.value)
	return b.next.RoundTrip(req)
}

// The environment variables that point a client at a TCP listener of
// boxd's (--listen) and give the bearer token its calls present.
const (
	HostEnv  = "BOXD_HOST"
	TokenEnv = "BOXD_TOKEN"
	// TLSCAEnv, TLSCertEnv and TLSKeyEnv are the files of --tls-ca,
	// --tls-cert and --tls-key: a private CA, and a client certificate
	// and its key.
	TLSCAEnv   = "BOXD_TLS_CA"
	TLSCertEnv = "BOXD_TLS_CERT"
	TLSKeyEnv  = "BOXD_TLS_KEY"
)

// The headers with which a fleet's gateway and controller, presenting the
// certificate a node's boxd names in --owner-asserter, assert the owner
// (a uid or user name) and scope (read, exec or write) of the caller they
// act for; boxd ignores them from anyone else.
const (
	AssertOwnerHeader = "Boxd-Assert-Owner"
	AssertScopeHeader = "Boxd-Assert-Scope"
)

// MaxTokenBytes is the longest bearer token boxd reads; a longer one is
// unauthenticated before it is looked at.
const MaxTokenBytes = 128

// ClientOptions are the connect options of every client on hc (an
// HTTPClient): bounded messages, no gzip, which on a local socket costs
// far more CPU than it saves, for keystrokes and file chunks alike,
// received file data in pooled buffers (see ChunkCodec), and uploads
// that wait for boxd's HTTP/2 settings (see uploadWarmer).
func ClientOptions(hc *http.Client) []connect.ClientOption {
	return []connect.ClientOption{
		connect.WithInterceptors(uploadWarmer{hc}),
		connect.WithReadMaxBytes(MaxMessageBytes), connect.WithSendMaxBytes(MaxMessageBytes),
		connect.WithAcceptCompression("gzip", nil, nil),
		connect.WithCodec(ChunkCodec{}),
	}
}
