package mcpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure ServeHTTP.
type HTTPOptions struct {
	// Socket is boxd's Unix socket.
	Socket  string
	Version string
	Log     *slog.Logger
	// IdleTimeout ends a session that sent no request for this long (a
	// client that went away without ending its session); 0: never.
	IdleTimeout time.Duration
	// SharedSessions lets every session use every sandbox of this user,
	// as boxd allows any of its clients; by default a session may use
	// only the sandboxes it created (Server.lookup).
	SharedSessions bool

	// Token, when set, must come with every request as
	// "Authorization: Bearer Token" (guard); a TCP listener sets it, a
	// Unix socket's mode 0600 is its access control.
	Token string
	// CheckOrigin refuses (403) a request whose Origin header is not one
	// of Origins, as MCP's transport asks of a server browsers can reach.
	CheckOrigin bool
	Origins     []string
	// TLS, when set, serves HTTPS.
	TLS *tls.Config
}

// ServeHTTP serves MCP's streamable HTTP transport on ln until ctx ends.
// Every MCP session (an initialize without Mcp-Session-Id) gets a Server
// of its own, so the sandboxes it creates carry its own session label and
// are deleted when that session ends: the client's DELETE, IdleTimeout
// passing, or ServeHTTP returning. Sandboxes created with keep stay.
// Every session reaches boxd as the same user, so boxd's owner check
// cannot keep them apart: unless o.SharedSessions, each Server allows its
// session only the sandboxes it created, and answers another session's
// sandbox exactly like a missing one. On TCP the caller sets o.Token,
// o.CheckOrigin and o.Origins (guard checks each request before MCP sees
// it) and, beyond loopback, o.TLS.
func ServeHTTP(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		mu   sync.Mutex
		live = map[*Server]*mcp.ServerSession{}
		wg   sync.WaitGroup
	)
	newSession := func(*http.Request) *mcp.Server {
		s, err := New(o.Socket, log)
		if err != nil {
			log.Error("new MCP session", "err", err)
			return nil // the handler answers 400
		}
		s.isolated = !o.SharedSessions
		srv := s.mcpServer(o.Version)
		// The session's end is known once it exists: watch it from the
		// first request it serves (initialize), whatever comes next.
		var once sync.Once
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
					once.Do(func() {
						mu.Lock()
						live[s] = ss
						mu.Unlock()
						wg.Add(1)
						go func() {
							defer wg.Done()
							_ = ss.Wait()
							log.Info("MCP session ended", "session", s.Session())
							if err := s.Cleanup(); err != nil {
								log.Warn("MCP session cleanup", "session", s.Session(), "err", err)
							}
							mu.Lock()
							delete(live, s)
							mu.Unlock()
						}()
					})
				}
				return next(ctx, method, req)
			}
		})
		return srv
	}
	h := mcp.NewStreamableHTTPHandler(newSession, &mcp.StreamableHTTPOptions{
		Logger:         log,
		SessionTimeout: o.IdleTimeout,
	})
	hs := &http.Server{Handler: guard(h, o), ReadHeaderTimeout: 10 * time.Second, TLSConfig: o.TLS}
	errc := make(chan error, 1)
	go func() {
		if o.TLS != nil {
			errc <- hs.ServeTLS(ln, "", "")
			return
		}
		errc <- hs.Serve(ln)
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	_ = hs.Close()
	// Sessions still open end with the server; their watchers delete
	// their sandboxes.
	mu.Lock()
	for _, ss := range live {
		_ = ss.Close()
	}
	mu.Unlock()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("serving MCP over HTTP: %w", err)
	}
	return nil
}
