package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// sandboxField is the JSON name of the input that names a sandbox, in
// every tool that takes one.
const sandboxField = "sandbox_id"

// addTool registers a tool. When its input names a sandbox (a string field
// tagged sandbox_id), the handler runs only after s.lookup has allowed
// that sandbox to this session, and sees the id lookup resolved, not the
// name the client sent (which could point elsewhere by the time the
// handler calls boxd). Every tool of this package is added through here,
// so a tool cannot skip the check; TestToolsGoThroughLookup and the e2e
// TestOwnershipMCPSessions call every tool that takes a sandbox_id.
func addTool[In, Out any](s *Server, srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	field := sandboxFieldIndex(reflect.TypeFor[In]())
	if field == nil {
		mcp.AddTool(srv, t, h)
		return
	}
	mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		ref := reflect.ValueOf(&in).Elem().FieldByIndex(field)
		id, err := s.lookup(ctx, ref.String())
		if err != nil {
			var zero Out
			return nil, zero, err
		}
		ref.SetString(id)
		return h(ctx, req, in)
	})
}

// sandboxFieldIndex is the index of In's sandbox_id field, nil if it has
// none. A sandbox_id that is not a string is a programming error.
func sandboxFieldIndex(t reflect.Type) []int {
	if t.Kind() != reflect.Struct {
		return nil
	}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != sandboxField {
			continue
		}
		if f.Type.Kind() != reflect.String || !f.IsExported() {
			panic(fmt.Sprintf("mcpserver: %s.%s: sandbox_id must be an exported string", t, f.Name))
		}
		return f.Index
	}
	return nil
}

// lookup is the one way from a client's sandbox_id (an id or a name) to
// the id a tool acts on. A server that keeps its sessions apart (HTTP
// without --shared-sessions) allows a session only the sandboxes it
// created, and answers any other, existing or not, with the same
// not_found, so one session cannot learn that another's ids exist. A
// shared server (stdio, or --shared-sessions) passes the reference on and
// boxd's own owner check decides, as for any of the user's clients.
func (s *Server) lookup(ctx context.Context, ref string) (string, error) {
	if !s.isolated {
		return ref, nil // the tool checks for an empty one, as it always did
	}
	if ref == "" {
		return "", errors.New("sandbox_id is required")
	}
	g, err := s.api.GetSandbox(ctx, connect.NewRequest(&boxdv1.GetSandboxRequest{Id: ref}))
	switch {
	case err == nil && s.owns(g.Msg.GetSandbox().GetId()):
		return g.Msg.GetSandbox().GetId(), nil
	case err == nil || connect.CodeOf(err) == connect.CodeNotFound:
		return "", notFound(ref)
	}
	return "", describe("sandbox "+ref, err)
}

// notFound is the answer for a sandbox this session may not use, worded
// as boxd words a missing one.
func notFound(ref string) error {
	return describe("sandbox "+ref, connect.NewError(connect.CodeNotFound, fmt.Errorf("sandbox %q not found", ref)))
}

// owns reports whether this session created sandbox id (and has not
// deleted it, nor ended).
func (s *Server) owns(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.created[id]
	return ok
}
