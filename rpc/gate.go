//go:build linux

package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/runtime"
)

// The gate is the one interceptor every API call passes: it refuses calls
// while boxd drains, calls without peer credentials and image changes by
// callers that are not admins, counts the calls in flight for the drain,
// and writes the audit line of every mutating call. Which sandboxes a
// caller may reach is decided in the runtime (runtime/owner.go) from the
// caller this package puts into each connection's context (callerContext).

// callerContext adds the runtime's view of the caller to a connection's
// context: its uid and whether it is an admin (root, or a member of
// --admin-group by its primary or supplementary groups, as the kernel
// sees the process that opened the connection).
func (s *Server) callerContext(ctx context.Context, c net.Conn) context.Context {
	unchecked := isUnchecked(c)
	ctx = connContext(ctx, c)
	p, ok := PeerFrom(ctx)
	if !ok {
		return ctx
	}
	groups := p.Groups
	if groups == nil {
		groups = procGroups(p.PID)
	}
	return runtime.WithCaller(ctx, runtime.Caller{UID: uint32(p.UID), Admin: s.isAdmin(p), Unchecked: unchecked,
		GID: uint32(p.GID), Groups: groups, GIDKnown: p.GID >= 0 && groups != nil})
}

func (s *Server) isAdmin(p Peer) bool {
	if p.UID == 0 {
		return true
	}
	if len(s.AdminGIDs) == 0 {
		return false
	}
	if slices.Contains(s.AdminGIDs, int(p.GID)) {
		return true
	}
	groups := p.Groups
	if groups == nil {
		groups = procGroups(p.PID)
	}
	for _, g := range groups {
		if slices.Contains(s.AdminGIDs, int(g)) {
			return true
		}
	}
	return false
}

// peerGroups reads the supplementary groups the peer of a Unix socket had
// when it connected (SO_PEERGROUPS, Linux 4.13): credentials fixed at
// connect, like SO_PEERCRED's, so no pid can be reused to fake them.
func peerGroups(fd uintptr) []uint32 {
	buf := make([]uint32, 64)
	for {
		n := uint32(len(buf) * 4)
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case e == 0:
			return buf[:n/4]
		case e == syscall.ERANGE && int(n/4) > len(buf):
			buf = make([]uint32, n/4)
		default:
			return nil
		}
	}
}

// procGroups reads a process's supplementary groups, for a kernel without
// SO_PEERGROUPS.
func procGroups(pid int32) []uint32 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			var out []uint32
			for _, f := range strings.Fields(rest) {
				if g, err := strconv.ParseUint(f, 10, 32); err == nil {
					out = append(out, uint32(g))
				}
			}
			return out
		}
	}
	return nil
}

// readOnlyPrefixes name the calls that change nothing; every other call is
// audited, so a call added later is audited unless it is named here.
var readOnlyPrefixes = []string{"Get", "List", "Stat", "Read", "Watch", "Download", "Wait", "Inspect", "Describe", "CopyOut", "Stats", "Events", "Diff"}

func method(procedure string) string {
	return procedure[strings.LastIndexByte(procedure, '/')+1:]
}

func mutating(procedure string) bool {
	m := method(procedure)
	for _, p := range readOnlyPrefixes {
		if strings.HasPrefix(m, p) {
			return false
		}
	}
	return true
}

type gate struct {
	s *Server

	mu       sync.Mutex
	inFlight int
	draining bool
	idle     chan struct{} // closed when draining and nothing is in flight
}

func newGate(s *Server) *gate { return &gate{s: s, idle: make(chan struct{})} }

// admit lets a call in or says why not; a call let in must call done.
func (g *gate) admit(ctx context.Context, procedure string) error {
	return g.admitRule(ctx, procedure, procRules[procedure])
}

// admitRule is admit with the procedure's rule looked up: a call of
// admins only (requestRules) is refused here to anyone else; the fields
// of its requests are checked as they arrive (checkFields).
func (g *gate) admitRule(ctx context.Context, procedure string, pr *procRule) error {
	if err := authErrFrom(ctx); err != nil {
		return err
	}
	if _, ok := PeerFrom(ctx); !ok {
		return connect.NewError(connect.CodePermissionDenied, errors.New("no peer credentials: boxd serves only callers on its Unix socket, whose uid it can read"))
	}
	if t, ok := tokenFrom(ctx); ok {
		if err := scopeAllows(t.Scope, procedure); err != nil {
			return err
		}
	}
	if pr != nil && pr.adminCall != "" {
		if c, _ := runtime.CallerFrom(ctx); !c.Admin {
			return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("%s: only root and members of boxd's --admin-group may %s", method(procedure), pr.adminCall))
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return connect.NewError(connect.CodeUnavailable, errors.New("boxd is shutting down (draining): retry when it is back"))
	}
	g.inFlight++
	return nil
}

// checkFields refuses a request message whose fields ask what only an
// admin may (requestRules), naming the field.
func (g *gate) checkFields(ctx context.Context, pr *procRule, m any) error {
	if pr == nil || pr.check == nil {
		return nil
	}
	if c, _ := runtime.CallerFrom(ctx); c.Admin {
		return nil
	}
	pm, ok := m.(proto.Message)
	if !ok {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("gate: request %T is not a protobuf message", m))
	}
	if err := pr.check.run(ctx, g.s, pm.ProtoReflect(), ""); err != nil {
		return connect.NewError(connect.CodePermissionDenied, err)
	}
	return nil
}

func (g *gate) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inFlight--
	if g.draining && g.inFlight == 0 {
		close(g.idle)
	}
}

// drain refuses new calls from now on and waits up to grace for the calls
// in flight to end. It reports how many were still running.
func (g *gate) drain(grace time.Duration) int {
	g.mu.Lock()
	if !g.draining {
		g.draining = true
		if g.inFlight == 0 {
			close(g.idle)
		}
	}
	g.mu.Unlock()
	select {
	case <-g.idle:
	case <-time.After(grace):
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight
}

func (g *gate) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		proc := req.Spec().Procedure
		pr := procRules[proc]
		if err := g.admitRule(ctx, proc, pr); err != nil {
			g.audit(ctx, proc, sandboxOf(req.Any()), err)
			return nil, err
		}
		defer g.done()
		if err := g.checkFields(ctx, pr, req.Any()); err != nil {
			if mutating(proc) { // as the handler's own refusals are
				g.audit(ctx, proc, sandboxOf(req.Any()), err)
			}
			return nil, err
		}
		if err := g.reserveAudit(proc); err != nil {
			return nil, err
		}
		resp, err := next(ctx, req)
		if mutating(proc) {
			sb := sandboxOf(req.Any())
			if sb == "" && err == nil {
				sb = sandboxOf(resp.Any())
			}
			g.audit(ctx, proc, sb, err)
		}
		return resp, err
	}
}

func (g *gate) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (g *gate) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		proc := conn.Spec().Procedure
		pr := procRules[proc]
		if err := g.admitRule(ctx, proc, pr); err != nil {
			g.audit(ctx, proc, "", err)
			return err
		}
		defer g.done()
		rc := &recordingConn{StreamingHandlerConn: conn}
		if pr != nil && pr.check != nil {
			rc.check = func(m any) error { return g.checkFields(ctx, pr, m) }
		}
		if err := g.reserveAudit(proc); err != nil {
			return err
		}
		err := next(ctx, rc)
		if mutating(proc) {
			g.audit(ctx, proc, rc.sandbox, err)
		}
		return err
	}
}

// recordingConn notes the sandbox a stream's first message names, and
// checks the fields of each message it receives if the call has rules
// for them.
type recordingConn struct {
	connect.StreamingHandlerConn
	sandbox string
	check   func(m any) error
}

func (c *recordingConn) Receive(m any) error {
	err := c.StreamingHandlerConn.Receive(m)
	if err == nil && c.sandbox == "" {
		c.sandbox = sandboxOf(m)
	}
	if err == nil && c.check != nil {
		err = c.check(m)
	}
	return err
}

// reserveAudit refuses a mutating call whose audit line could not be
// written (the state disk is full) before it acts: a call is acknowledged
// only if it is audited.
func (g *gate) reserveAudit(proc string) error {
	if g.s.Audit == nil || !mutating(proc) {
		return nil
	}
	if err := g.s.Audit.Reserve(); err != nil {
		g.s.Log.Error("audit log: refusing a mutating call", "method", proc, "err", err)
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%s refused: the audit log cannot be written (is boxd's state disk full?): %w", method(proc), err))
	}
	return nil
}

func (g *gate) audit(ctx context.Context, proc, sandbox string, err error) {
	l := g.s.Audit
	if l == nil || authBlocked(ctx) {
		return
	}
	e := audit.Entry{Time: time.Now().UTC(), UID: -1, Method: proc, Sandbox: sandbox, Result: "ok"}
	if p, ok := PeerFrom(ctx); ok {
		e.UID, e.PID = int64(p.UID), p.PID
	}
	if t, ok := tokenFrom(ctx); ok {
		e.Token = t.Name
	}
	if err != nil {
		e.Result = connect.CodeOf(err).String()
		e.Error = err.Error()
		if len(e.Error) > 512 {
			e.Error = e.Error[:512]
		}
	}
	if werr := l.Write(e); werr != nil {
		g.s.Log.Error("audit log", "err", werr)
	}
}

// sandboxOf finds the sandbox a message names: a sandbox_id field (also in
// a nested message such as a process spec or a stream's start message),
// the id of a Get/Delete request, or the id of the Sandbox a create's
// response carries.
func sandboxOf(m any) string {
	pm, ok := m.(proto.Message)
	if !ok || pm == nil {
		return ""
	}
	// The usual case, every exec's, without reflection: a sandbox_id at
	// the top (the generated getter of that field and no other).
	if s, ok := m.(interface{ GetSandboxId() string }); ok {
		if id := s.GetSandboxId(); id != "" {
			return id
		}
	}
	return sandboxIn(pm.ProtoReflect(), true, 2)
}

func sandboxIn(r protoreflect.Message, top bool, depth int) string {
	if !r.IsValid() {
		return ""
	}
	fields := r.Descriptor().Fields()
	names := []protoreflect.Name{"sandbox_id"}
	if top {
		names = append(names, "id")
	}
	for _, name := range names {
		if f := fields.ByName(name); f != nil && f.Kind() == protoreflect.StringKind && !f.IsList() {
			if v := r.Get(f).String(); v != "" {
				return v
			}
		}
	}
	if depth == 0 {
		return ""
	}
	found := ""
	r.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f.Kind() == protoreflect.MessageKind && !f.IsList() && !f.IsMap() {
			found = sandboxIn(v.Message(), f.Name() == "sandbox", depth-1)
		}
		return found == ""
	})
	return found
}

// uncheckedListener marks its connections as the benchmark's: calls on
// them skip the ownership check (--bench-unchecked-socket, a bench aid).
type uncheckedListener struct{ net.Listener }

type uncheckedConn struct{ net.Conn }

func (l uncheckedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return uncheckedConn{c}, nil
}

// NetConn is the socket, for its buffers and credentials.
func (c uncheckedConn) NetConn() net.Conn { return c.Conn }

func isUnchecked(c net.Conn) bool {
	for {
		if _, ok := c.(uncheckedConn); ok {
			return true
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return false
		}
		c = w.NetConn()
	}
}
