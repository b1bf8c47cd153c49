//go:build linux

// Package dockerapi serves the Docker Engine API on a Unix socket of its
// own (boxd --docker-socket), so code written against Docker's clients
// runs its sandboxes on boxd unchanged. A container is a boxd sandbox
// whose main command runs under boxd's init as a background process.
//
// The callers are identified as on boxd's own socket: the daemon hands in
// the same connection context (SO_PEERCRED, admin group), and every call
// reaches sandboxes through runtime.Manager, whose ownership check makes
// another user's container "No such container". Fields boxd does not know
// are refused (fields.go): nothing a client asks for is silently dropped
// unless the ignored table says it is harmless.
//
// Files by resource group: server.go the HTTP side (versions, errors,
// audit); system.go _ping, version, info; fields.go the create tables;
// containers*.go create, inspect, list and the lifecycle; logs.go the
// main command's output; exec.go; archive.go; images.go; stream.go the
// multiplexed framing and hijacked connections.
package dockerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/registry"
	"github.com/boxd-dev/boxd/runtime"
	"github.com/boxd-dev/boxd/snapshot"
)

// API versions served: MinVersion is the oldest a path may name, and
// MaxVersion what /version reports and unversioned paths speak.
const (
	MinVersion = "1.41"
	MaxVersion = "1.43"
)

// Server serves the Docker Engine API on boxd's runtime.
type Server struct {
	Manager  *runtime.Manager
	Images   *snapshot.Store
	Registry *registry.Registry // nil: image create answers 501
	Log      *slog.Logger
	Audit    *audit.Log  // nil: none
	Events   *events.Log // nil: GET /events answers 503
	// ConnContext identifies the caller of a connection exactly as boxd's
	// main socket does (rpc.Server.CallerContext).
	ConnContext func(context.Context, net.Conn) context.Context
	// StateDir keeps each container's Docker config, state and log.
	StateDir string
	// DefaultNetwork is the boxd network mode NetworkMode default and
	// bridge map to ("none" or "egress"); Allow the egress allowlist.
	DefaultNetwork string
	DefaultAllow   []string
	// DefaultTTL is the lifetime of containers made here ("" the daemon's).
	DefaultTTL time.Duration
	// Version is boxd's version, shown in /version.
	Version string

	ctrs   containers
	execs  execs
	actors actors
}

// Handler is the API's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.systemRoutes(mux)
	s.containerRoutes(mux)
	s.execRoutes(mux)
	s.archiveRoutes(mux)
	s.imageRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("page not found: %s %s", r.Method, r.URL.Path))
	})
	return s.versioned(s.audited(mux))
}

// Serve serves ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.ctrs.init()
	s.execs.init()
	s.sweep(ctx)
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ConnContext:       s.ConnContext,
		ErrorLog:          slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = srv.Close()
		return nil
	}
}

type versionKey struct{}

// versioned strips a /v1.NN prefix, refusing versions boxd does not speak
// with Docker's own 400s, and refuses callers without credentials.
func (s *Server) versioned(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := MaxVersion
		if rest, ok := strings.CutPrefix(r.URL.Path, "/v"); ok {
			if i := strings.IndexByte(rest, '/'); i > 0 && validVersion(rest[:i]) {
				v = rest[:i]
				r.URL.Path = rest[i:]
				r.URL.RawPath = ""
				switch {
				case versionLess(MaxVersion, v):
					writeErr(w, http.StatusBadRequest, fmt.Sprintf("client version %s is too new. Maximum supported API version is %s", v, MaxVersion))
					return
				case versionLess(v, MinVersion):
					writeErr(w, http.StatusBadRequest, fmt.Sprintf("client version %s is too old. Minimum supported API version is %s, please upgrade your client to a newer version", v, MinVersion))
					return
				}
			}
		}
		if _, ok := runtime.CallerFrom(r.Context()); !ok {
			writeErr(w, http.StatusForbidden, "boxd could not read the caller's credentials (SO_PEERCRED)")
			return
		}
		w.Header().Set("Api-Version", MaxVersion)
		w.Header().Set("Server", "boxd")
		w.Header().Set("Ostype", "linux")
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), versionKey{}, v)))
	})
}

func validVersion(v string) bool {
	maj, min, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	_, e1 := strconv.Atoi(maj)
	_, e2 := strconv.Atoi(min)
	return e1 == nil && e2 == nil
}

// versionLess compares MAJOR.MINOR versions.
func versionLess(a, b string) bool {
	am, an, _ := strings.Cut(a, ".")
	bm, bn, _ := strings.Cut(b, ".")
	x, _ := strconv.Atoi(am)
	y, _ := strconv.Atoi(bm)
	if x != y {
		return x < y
	}
	x, _ = strconv.Atoi(an)
	y, _ = strconv.Atoi(bn)
	return x < y
}

// apiVersion is the version the request's path named (MaxVersion if none).
func apiVersion(r *http.Request) string {
	v, _ := r.Context().Value(versionKey{}).(string)
	if v == "" {
		return MaxVersion
	}
	return v
}

// errorBody is Docker's error shape.
type errorBody struct {
	Message string `json:"message"`
}

func writeErr(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeBody writes v as the JSON body of a response whose header is out.
func writeBody(w http.ResponseWriter, v any) {
	_ = json.NewEncoder(w).Encode(v)
}

// httpError is an error with the HTTP status Docker answers it with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errf(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// fail answers err in Docker's shape, its status from its errdefs class.
func fail(w http.ResponseWriter, err error) {
	var he *httpError
	if errors.As(err, &he) {
		writeErr(w, he.code, he.msg)
		return
	}
	writeErr(w, statusOf(err), strings.TrimSuffix(err.Error(), ": "+classText(err)))
}

func statusOf(err error) int {
	switch {
	case errdefs.IsNotFound(err):
		return http.StatusNotFound
	case errdefs.IsInvalidArgument(err):
		return http.StatusBadRequest
	case errdefs.IsAlreadyExists(err), errdefs.IsConflict(err), errdefs.IsFailedPrecondition(err):
		return http.StatusConflict
	case errdefs.IsPermissionDenied(err):
		return http.StatusForbidden
	case errdefs.IsResourceExhausted(err), errdefs.IsUnavailable(err):
		return http.StatusServiceUnavailable
	case errdefs.IsNotImplemented(err):
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

func classText(err error) string {
	for _, e := range []error{errdefs.ErrNotFound, errdefs.ErrInvalidArgument, errdefs.ErrAlreadyExists, errdefs.ErrConflict,
		errdefs.ErrFailedPrecondition, errdefs.ErrPermissionDenied, errdefs.ErrResourceExhausted, errdefs.ErrUnavailable} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return ""
}

// decodeBody reads a JSON request body of at most 1 MiB into v.
func decodeBody(r *http.Request, v any) error {
	if r.Body == nil {
		return nil
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return errf(http.StatusBadRequest, "malformed JSON body: %v", err)
	}
	return nil
}

// boolParam reads a query flag as Docker does: 1, true, True.
func boolParam(r *http.Request, name string) bool {
	v := r.URL.Query().Get(name)
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

func isAdmin(ctx context.Context) bool {
	c, _ := runtime.CallerFrom(ctx)
	return c.Admin || c.Unchecked
}

// writeBody0 is writeBody that reports a client gone.
func writeBody0(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
