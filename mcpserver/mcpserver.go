// Package mcpserver serves boxd to AI agents over the Model Context
// Protocol: tools to create, list and delete sandboxes, run commands and
// read, write, list and edit files, each a thin call of boxd's API through
// internal/rpcclient. `boxctl mcp` runs it on stdio, or with --http-socket on
// streamable HTTP over a Unix socket, or with --http over TCP behind a
// bearer token and an Origin check (ServeHTTP: one Server per session).
//
// Sandboxes that a client creates carry the label mcp-session=<id> of its
// session and are deleted when the session ends (the client closes stdin
// or goes away), unless the client asked to keep them. All sessions act on
// boxd as the same user, so boxd cannot tell them apart: over HTTP, each
// session may use only the sandboxes it created (Server.lookup), unless
// the server was started to share them.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/boxd-dev/boxd/internal/rpcclient"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// SessionLabel marks the sandboxes an MCP session created.
const SessionLabel = "mcp-session"

// KeepLabel marks a sandbox its session must not delete at the end.
const KeepLabel = "mcp-keep"

// Server is one MCP session's view of boxd.
type Server struct {
	api     boxdv1connect.SandboxServiceClient
	files   boxdv1connect.FileServiceClient
	procs   boxdv1connect.ProcessServiceClient
	code    boxdv1connect.CodeServiceClient
	log     *slog.Logger
	session string
	// isolated: this session may use only the sandboxes it created
	// (lookup), as an HTTP session among others is unless the server
	// shares them (--shared-sessions).
	isolated bool

	mu      sync.Mutex
	created map[string]bool // sandbox id -> keep
	closed  bool            // Cleanup has run: the session is over
}

// New returns a Server for boxd's socket at socket.
func New(socket string, log *slog.Logger) (*Server, error) {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		api:     rpcclient.New(socket),
		files:   rpcclient.NewFiles(socket),
		procs:   rpcclient.NewProcess(socket),
		code:    rpcclient.NewCode(socket),
		log:     log,
		session: hex.EncodeToString(id),
		created: map[string]bool{},
	}, nil
}

// Session is this server's session id, the value of SessionLabel.
func (s *Server) Session() string { return s.session }

// Run serves MCP on t until the client goes away or ctx ends, then deletes
// the sandboxes this session created that were not to be kept.
func (s *Server) Run(ctx context.Context, t mcp.Transport, version string) error {
	err := s.mcpServer(version).Run(ctx, t)
	cerr := s.Cleanup()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, cerr)
}

// mcpServer is the MCP server of this session, with its tools.
func (s *Server) mcpServer(version string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "boxd", Title: "boxd sandboxes", Version: version}, &mcp.ServerOptions{
		Instructions: "boxd runs untrusted code in isolated Linux sandboxes (containers without network unless created with network egress). " +
			"Create a sandbox with sandbox_create, run commands in it with exec, move files with read_file, " +
			"write_file, edit_file and list_files, run background processes with process_start and process_read, and delete it with sandbox_delete when done. Sandboxes this " +
			"session creates are deleted when it ends unless created with keep=true.",
		Logger: s.log,
	})
	s.addTools(srv)
	return srv
}

// Cleanup deletes the sandboxes this session created and did not keep.
// It has its own deadline: the session's context is usually over by now.
func (s *Server) Cleanup() error {
	s.mu.Lock()
	s.closed = true
	var ids []string
	for id, keep := range s.created {
		if !keep {
			ids = append(ids, id)
		}
	}
	s.created = map[string]bool{}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, id := range ids {
		_, err := s.api.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id}))
		if err != nil && connect.CodeOf(err) != connect.CodeNotFound {
			errs = append(errs, fmt.Errorf("delete sandbox %s of MCP session %s: %w", id, s.session, err))
			continue
		}
		s.log.Info("deleted sandbox at the end of the MCP session", "sandbox", id, "session", s.session)
	}
	return errors.Join(errs...)
}

// remember records a sandbox the session created. One created while the
// session was ending (a call in flight when the client went away) is
// deleted at once unless kept: Cleanup has already run.
func (s *Server) remember(id string, keep bool) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.created[id] = keep
	}
	s.mu.Unlock()
	if closed && !keep {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.api.DeleteSandbox(ctx, connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id})); err != nil {
			s.log.Warn("deleting a sandbox created as its MCP session ended", "sandbox", id, "session", s.session, "err", err)
		}
	}
}

func (s *Server) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.created, id)
}

// describe turns boxd's error into one line an LLM can act on: the API's
// code and message.
func describe(what string, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return fmt.Errorf("%s: %s: %s", what, ce.Code(), ce.Message())
	}
	return fmt.Errorf("%s: %w", what, err)
}

// text is a tool result of one text block.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
