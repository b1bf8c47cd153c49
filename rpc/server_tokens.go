//go:build linux

package rpc

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/containerd/errdefs"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
	"github.com/boxd-dev/boxd/runtime"
)

// tokenServer serves TokenService (tokens.go keeps them).
type tokenServer struct{ s *Server }

var _ boxdv1connect.TokenServiceHandler = (*tokenServer)(nil)

var errNoTokens = connect.NewError(connect.CodeUnimplemented, errors.New("tokens: boxd keeps no tokens (no state directory)"))

// tokenOwner reads a request's owner: empty is the caller. A non-admin
// naming another user is refused by the gate (tokenOwnerRule) and here.
func tokenOwner(ctx context.Context, owner string) (uint32, error) {
	c, _ := runtime.CallerFrom(ctx)
	if owner == "" {
		return c.UID, nil
	}
	uid, err := lookupOwner(owner)
	if err != nil {
		return 0, ToConnect(err)
	}
	if uid != c.UID && !c.Admin {
		return 0, connect.NewError(connect.CodePermissionDenied, errors.New("owner: a non-admin may name only itself"))
	}
	return uid, nil
}

func tokenMessage(r TokenRecord) *boxdv1.Token {
	t := &boxdv1.Token{Name: r.Name, OwnerUid: r.UID, Owner: userName(r.UID), Scope: r.Scope,
		Created: r.Created.Unix(), Expires: r.Expires.Unix()}
	if !r.LastUsed.IsZero() {
		t.LastUsed = r.LastUsed.Unix()
	}
	return t
}

func (t *tokenServer) CreateToken(ctx context.Context, req *connect.Request[boxdv1.CreateTokenRequest]) (*connect.Response[boxdv1.CreateTokenResponse], error) {
	if t.s.Tokens == nil {
		return nil, errNoTokens
	}
	m := req.Msg
	uid, err := tokenOwner(ctx, m.Owner)
	if err != nil {
		return nil, err
	}
	scope := m.Scope
	if scope == "" {
		scope = ScopeWrite
	}
	if c, _ := runtime.CallerFrom(ctx); scope == ScopeAdmin && !c.Admin {
		return nil, connect.NewError(connect.CodePermissionDenied, errors.New("scope: only admins may create tokens of scope admin"))
	}
	ttl, err := ParseTokenTTL(m.Ttl)
	if err != nil {
		return nil, ToConnect(err)
	}
	if _, _, ok := userGroups(uid); !ok {
		return nil, ToConnect(fmt.Errorf("owner: uid %d is no user of this host: %w", uid, errdefs.ErrInvalidArgument))
	}
	rec, secret, err := t.s.Tokens.Create(m.Name, uid, scope, ttl)
	if err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.CreateTokenResponse{Token: tokenMessage(rec), Secret: secret}), nil
}

func (t *tokenServer) ListTokens(ctx context.Context, _ *connect.Request[boxdv1.ListTokensRequest]) (*connect.Response[boxdv1.ListTokensResponse], error) {
	if t.s.Tokens == nil {
		return nil, errNoTokens
	}
	c, _ := runtime.CallerFrom(ctx)
	out := &boxdv1.ListTokensResponse{}
	for _, r := range t.s.Tokens.List(c.UID, c.Admin) {
		out.Tokens = append(out.Tokens, tokenMessage(r))
	}
	return connect.NewResponse(out), nil
}

func (t *tokenServer) DeleteToken(ctx context.Context, req *connect.Request[boxdv1.DeleteTokenRequest]) (*connect.Response[boxdv1.DeleteTokenResponse], error) {
	if t.s.Tokens == nil {
		return nil, errNoTokens
	}
	uid, err := tokenOwner(ctx, req.Msg.Owner)
	if err != nil {
		return nil, err
	}
	if err := t.s.Tokens.Delete(req.Msg.Name, uid); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.DeleteTokenResponse{}), nil
}
