//go:build linux

package rpc

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/internal/secrets"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
)

// secretServer implements boxdv1connect.SecretServiceHandler: thin over
// the runtime, which scopes every secret to its owner. No answer carries
// a value.
type secretServer struct{ s *Server }

var _ boxdv1connect.SecretServiceHandler = (*secretServer)(nil)

func secretProto(i secrets.Info) *boxdv1.SecretInfo {
	return &boxdv1.SecretInfo{Name: i.Name, OwnerUid: i.Owner, Hosts: i.Hosts, Header: i.Header, Format: i.Format,
		AllowHttp: i.AllowHTTP, CreatedAt: i.CreatedAt.Format(time.RFC3339), UpdatedAt: i.UpdatedAt.Format(time.RFC3339)}
}

func (v *secretServer) CreateSecret(ctx context.Context, req *connect.Request[boxdv1.CreateSecretRequest]) (*connect.Response[boxdv1.CreateSecretResponse], error) {
	m := req.Msg
	info, err := v.s.Manager.CreateSecret(ctx, secrets.Secret{Name: m.Name, Value: m.Value, Hosts: m.Hosts, Header: m.Header,
		Format: m.Format, AllowHTTP: m.AllowHttp, UpstreamCA: m.UpstreamCa})
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CreateSecretResponse{Secret: secretProto(info)}), nil
}

func (v *secretServer) ListSecrets(ctx context.Context, _ *connect.Request[boxdv1.ListSecretsRequest]) (*connect.Response[boxdv1.ListSecretsResponse], error) {
	list, err := v.s.Manager.ListSecrets(ctx)
	if err != nil {
		return nil, ToConnect(err)
	}
	out := &boxdv1.ListSecretsResponse{}
	for _, i := range list {
		out.Secrets = append(out.Secrets, secretProto(i))
	}
	return connect.NewResponse(out), nil
}

func (v *secretServer) RotateSecret(ctx context.Context, req *connect.Request[boxdv1.RotateSecretRequest]) (*connect.Response[boxdv1.RotateSecretResponse], error) {
	info, err := v.s.Manager.RotateSecret(ctx, req.Msg.Name, req.Msg.Value)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.RotateSecretResponse{Secret: secretProto(info)}), nil
}

func (v *secretServer) RemoveSecret(ctx context.Context, req *connect.Request[boxdv1.RemoveSecretRequest]) (*connect.Response[boxdv1.RemoveSecretResponse], error) {
	if err := v.s.Manager.RemoveSecret(ctx, req.Msg.Name); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.RemoveSecretResponse{}), nil
}

// sandboxSecretsProto is what inspect shows of a sandbox's secrets.
func sandboxSecretsProto(n *runtime.NetworkInfo) []*boxdv1.SandboxSecret {
	if n == nil {
		return nil
	}
	var out []*boxdv1.SandboxSecret
	for _, s := range n.Secrets {
		out = append(out, &boxdv1.SandboxSecret{Name: s.Name, Env: s.Env, Hosts: s.Hosts})
	}
	return out
}
