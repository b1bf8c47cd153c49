//go:build linux

package dockerapi

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/runtime"
)

// audited writes an audit line for every call that may change something
// (any method but GET and HEAD), as boxd's own API does for its mutating
// calls: the method is "docker " plus the HTTP method and the route.
func (s *Server) audited(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Audit == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		rec := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		e := audit.Entry{Time: time.Now().UTC(), UID: -1, Method: "docker " + r.Method + " " + r.Pattern,
			Sandbox: r.PathValue("id"), Result: "ok"}
		if c, ok := runtime.CallerFrom(r.Context()); ok {
			e.UID = int64(c.UID)
		}
		if rec.code >= 400 {
			e.Result = strconv.Itoa(rec.code)
		}
		if err := s.Audit.Write(e); err != nil {
			s.Log.Error("audit log", "err", err)
		}
	})
}

// statusWriter records the status; it passes hijacking and flushing on,
// which exec, attach and log streams need.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.code = http.StatusSwitchingProtocols
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
