// Package boxd drives boxd sandboxes from Go: connect to the daemon,
// create a sandbox with every setting the API has, run commands in it,
// move files in and out, and delete it.
//
//	c, err := boxd.Connect(ctx)
//	sb, err := c.Create(ctx, boxd.Options{Memory: "512m", CPUs: 1})
//	defer sb.Close()
//	res, err := sb.Exec(ctx, "sh", "-c", "echo $((6*7))")
//	fmt.Print(res.StdoutString(), res.ExitCode)
//
// Calls fail with an *Error matching one of the Err* values under
// errors.Is. For calls this package does not wrap, Client.API gives the
// generated clients of every service on the same connection.
package boxd

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// DefaultSocket is where boxd listens unless told otherwise.
const DefaultSocket = apiwire.DefaultSocket

// SocketEnv names the environment variable Connect reads the socket's path
// from when no option names one; boxctl reads the same one.
const SocketEnv = "BOXD_SOCKET"

// InstanceEnv names the environment variable that picks a boxd instance
// (boxd --instance NAME) when neither an option nor SocketEnv names a
// socket; boxctl reads the same one.
const InstanceEnv = "BOXD_INSTANCE"

// Client is a connection to one boxd. It is safe for concurrent use; one
// per program is enough.
type Client struct {
	socket string // or the host, for a TCP listener
	base   string
	hc     *http.Client
	api    *API
}

// API holds the generated clients of boxd's services, for calls this
// package does not wrap (their messages and semantics: docs/api.md).
// They share the Client's connection, limits and codec.
type API struct {
	Sandboxes boxdv1connect.SandboxServiceClient
	Files     boxdv1connect.FileServiceClient
	Processes boxdv1connect.ProcessServiceClient
	Registry  boxdv1connect.RegistryServiceClient
	Events    boxdv1connect.EventServiceClient
	Pool      boxdv1connect.PoolServiceClient
	Code      boxdv1connect.CodeServiceClient
}

type settings struct{ socket, instance, host, token, caFile string }

// Option changes how Connect connects.
type Option func(*settings)

// WithSocket connects to boxd's Unix socket at path.
func WithSocket(path string) Option { return func(s *settings) { s.socket = path } }

// WithInstance connects to the boxd started with --instance name, at
// /run/boxd-NAME/boxd.sock ("" or "default": the default instance).
func WithInstance(name string) Option { return func(s *settings) { s.instance = name } }

// WithHost connects to a TCP listener of boxd's (boxd --listen) at
// https://HOST:PORT instead of a socket; $BOXD_HOST does the same. Calls
// there need a token (WithToken or $BOXD_TOKEN).
func WithHost(url string) Option { return func(s *settings) { s.host = url } }

// WithToken is the bearer token calls to WithHost's listener present
// (boxctl token create).
func WithToken(token string) Option { return func(s *settings) { s.token = token } }

// WithTLSCA trusts the PEM certificates in file, a private CA, for
// WithHost's listener instead of the system's.
func WithTLSCA(file string) Option { return func(s *settings) { s.caFile = file } }

// remoteClient is the HTTP client of s's host, if one is set.
func remoteClient(s settings) (*http.Client, string, error) {
	host := cmp.Or(s.host, os.Getenv(apiwire.HostEnv))
	if host == "" {
		return nil, "", nil
	}
	u, err := url.Parse(host)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, "", newError(connect.CodeInvalidArgument, "host: "+strconv.Quote(host)+" is not https://HOST:PORT")
	}
	token := cmp.Or(s.token, os.Getenv(apiwire.TokenEnv))
	if token == "" {
		return nil, "", newError(connect.CodeInvalidArgument, "host: no token (WithToken or $"+apiwire.TokenEnv+")")
	}
	var roots *x509.CertPool
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, "", newError(connect.CodeInvalidArgument, "tls ca: "+err.Error())
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, "", newError(connect.CodeInvalidArgument, "tls ca: "+s.caFile+" holds no PEM certificate")
		}
	}
	base := strings.TrimSuffix(u.String(), "/")
	return apiwire.RemoteClient(u, token, roots), base, nil
}

// instanceSocket is the API socket of instance name, as boxd derives it.
func instanceSocket(name string) (string, error) {
	if name == "" || name == "default" {
		return DefaultSocket, nil
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) || len(name) > 10 {
			return "", newError(connect.CodeInvalidArgument, "instance: "+strconv.Quote(name)+" is not an instance name (1-10 of a-z, 0-9 and '-', not first)")
		}
	}
	return "/run/boxd-" + name + "/boxd.sock", nil
}

// socketOf picks the socket: an option's (WithSocket, then WithInstance),
// else $BOXD_SOCKET, else $BOXD_INSTANCE's, else DefaultSocket.
func socketOf(s settings) (string, error) {
	switch {
	case s.socket != "":
		return s.socket, nil
	case s.instance != "":
		return instanceSocket(s.instance)
	case os.Getenv(SocketEnv) != "":
		return os.Getenv(SocketEnv), nil
	}
	return instanceSocket(os.Getenv(InstanceEnv))
}

// Connect connects to boxd: the socket given WithSocket or WithInstance,
// else $BOXD_SOCKET, else $BOXD_INSTANCE's, else DefaultSocket. It fails
// with ErrUnavailable, naming the socket, if no boxd answers there, and
// with ErrPermissionDenied if the caller may not open the socket.
func Connect(ctx context.Context, opts ...Option) (*Client, error) {
	var s settings
	for _, o := range opts {
		o(&s)
	}
	hc, base, err := remoteClient(s)
	if err != nil {
		return nil, err
	}
	socket := base
	if hc == nil {
		if socket, err = socketOf(s); err != nil {
			return nil, err
		}
		hc, base = apiwire.HTTPClient(socket), apiwire.BaseURL
	}
	c := &Client{socket: socket, base: base, hc: hc, api: newAPI(hc, base)}
	if err := c.ping(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func newAPI(hc *http.Client, u string) *API {
	o := apiwire.ClientOptions(hc)
	return &API{
		Sandboxes: boxdv1connect.NewSandboxServiceClient(hc, u, o...),
		Files:     boxdv1connect.NewFileServiceClient(hc, u, o...),
		Processes: boxdv1connect.NewProcessServiceClient(hc, u, o...),
		Registry:  boxdv1connect.NewRegistryServiceClient(hc, u, o...),
		Events:    boxdv1connect.NewEventServiceClient(hc, u, o...),
		Pool:      boxdv1connect.NewPoolServiceClient(hc, u, o...),
		Code:      boxdv1connect.NewCodeServiceClient(hc, u, o...),
	}
}

// ping makes one request boxd answers at once (404: no such procedure),
// which opens the connection the calls will use.
func (c *Client) ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/", nil)
	if err != nil {
		return newError(connect.CodeInternal, err.Error())
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		code := connect.CodeUnavailable
		switch {
		case errors.Is(err, context.Canceled):
			code = connect.CodeCanceled
		case errors.Is(err, context.DeadlineExceeded):
			code = connect.CodeDeadlineExceeded
		case errors.Is(err, fs.ErrPermission):
			code = connect.CodePermissionDenied
		}
		return wrap(connect.NewError(code, &socketError{c.socket, err}))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return nil
}

type socketError struct {
	socket string
	err    error
}

func (e *socketError) Error() string {
	return "boxd is not reachable on " + e.socket + ": " + e.err.Error()
}
func (e *socketError) Unwrap() error { return e.err }

// Socket is the path of the socket c is connected to (the host, for a
// TCP listener).
func (c *Client) Socket() string { return c.socket }

// API gives the generated clients of every service, on c's connection.
func (c *Client) API() *API { return c.api }

// Close closes c's idle connections. Sandboxes live on in boxd until
// deleted or their TTL passes.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// Create makes a sandbox with the settings in o and returns once it runs.
func (c *Client) Create(ctx context.Context, o Options) (*Sandbox, error) {
	req, err := o.request()
	if err != nil {
		return nil, err
	}
	res, err := c.api.Sandboxes.CreateSandbox(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, wrap(err)
	}
	return c.sandbox(res.Msg.GetSandbox()), nil
}

// Get finds a sandbox by id or name (ErrNotFound if the caller has none
// by that id or name).
func (c *Client) Get(ctx context.Context, idOrName string) (*Sandbox, error) {
	res, err := c.api.Sandboxes.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: idOrName}))
	if err != nil {
		return nil, wrap(err)
	}
	return c.sandbox(res.Msg.GetSandbox()), nil
}

// List returns the caller's sandboxes that carry every label in labels
// (all of them for none).
func (c *Client) List(ctx context.Context, labels map[string]string) ([]*Sandbox, error) {
	res, err := c.api.Sandboxes.ListSandboxes(ctx, connect.NewRequest(&boxdv1.ListSandboxesRequest{Labels: labels}))
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]*Sandbox, 0, len(res.Msg.GetSandboxes()))
	for _, s := range res.Msg.GetSandboxes() {
		out = append(out, c.sandbox(s))
	}
	return out, nil
}

func (c *Client) sandbox(info *boxdv1.Sandbox) *Sandbox {
	return &Sandbox{ID: info.GetId(), Name: info.GetName(), Info: info, c: c}
}
