// Package rpcclient is boxctl's and boxd's own tools' client of boxd's
// API: the generated ConnectRPC clients over the socket, with the
// transport and codec of package apiwire. Programs outside this repository
// use the Go SDK (sdk/go/boxd) instead.
package rpcclient

import (
	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// newClient makes a client of one service (mk, a generated constructor)
// on its own HTTP client for the socket at path, or on the remote
// listener's client once SetRemote has run.
func newClient[T any](path string, mk func(connect.HTTPClient, string, ...connect.ClientOption) T) T {
	if r := remoteOf(); r != nil {
		return mk(r.hc, r.base, apiwire.ClientOptions(r.hc)...)
	}
	hc := apiwire.HTTPClient(path)
	return mk(hc, apiwire.BaseURL, apiwire.ClientOptions(hc)...)
}

// New returns a SandboxService client for the Unix socket at path.
func New(path string) boxdv1connect.SandboxServiceClient {
	return newClient(path, boxdv1connect.NewSandboxServiceClient)
}

// NewProcess returns a ProcessService client for the Unix socket at path.
func NewProcess(path string) boxdv1connect.ProcessServiceClient {
	return newClient(path, boxdv1connect.NewProcessServiceClient)
}

// NewFiles returns a FileService client for the Unix socket at path.
func NewFiles(path string) boxdv1connect.FileServiceClient {
	return newClient(path, boxdv1connect.NewFileServiceClient)
}

// NewRegistry returns a RegistryService client for the Unix socket at path.
func NewRegistry(path string) boxdv1connect.RegistryServiceClient {
	return newClient(path, boxdv1connect.NewRegistryServiceClient)
}

// NewEvents returns an EventService client for the Unix socket at path.
func NewEvents(path string) boxdv1connect.EventServiceClient {
	return newClient(path, boxdv1connect.NewEventServiceClient)
}

// NewPool returns a PoolService client for the Unix socket at path.
func NewPool(path string) boxdv1connect.PoolServiceClient {
	return newClient(path, boxdv1connect.NewPoolServiceClient)
}

// NewTokens returns a TokenService client for the Unix socket at path.
func NewTokens(path string) boxdv1connect.TokenServiceClient {
	return newClient(path, boxdv1connect.NewTokenServiceClient)
}

// NewVolumes returns a VolumeService client for the Unix socket at path.
func NewVolumes(path string) boxdv1connect.VolumeServiceClient {
	return newClient(path, boxdv1connect.NewVolumeServiceClient)
}

// NewCode returns a CodeService client for the Unix socket at path.
func NewCode(path string) boxdv1connect.CodeServiceClient {
	return newClient(path, boxdv1connect.NewCodeServiceClient)
}

// NewSecrets returns a SecretService client for the Unix socket at path.
func NewSecrets(path string) boxdv1connect.SecretServiceClient {
	return newClient(path, boxdv1connect.NewSecretServiceClient)
}
