// Package ports publishes sandbox ports on the host: boxd listens on a host
// address (loopback unless the daemon was told otherwise) and joins every
// connection it accepts, through the sandbox's init, to the sandbox's own
// 127.0.0.1:PORT (agent/wire.OpDial). It needs no network in the sandbox:
// the path is boxd's channel to the init, so it works for a sandbox that
// has loopback only. The listener is boxd's: the sandbox never chooses
// where boxd listens, and what it sends is copied as opaque bytes with
// bounded buffers (wire.Splice).
package ports

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/agent/wire"
)

// ProtoTCP is the only protocol published ports carry for now.
const ProtoTCP = "tcp"

// Mapping is one published port: HostIP:HostPort on the host leads to
// 127.0.0.1:Port in the sandbox. It is stored in the sandbox's labels as
// JSON, so a restarted boxd listens again.
type Mapping struct {
	HostIP   string `json:"host_ip"`
	HostPort int    `json:"host_port"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
	// Down, in the record, says why boxd does not listen on this mapping:
	// listening again after a boxd restart failed (one of the Down*
	// reasons). boxd never retries it by itself, so it cannot take the
	// port from whatever holds it; publishing it again does. Empty: boxd
	// listens.
	Down string `json:"down,omitempty"`
	// Admin records that an admin published this host port below
	// net.ipv4.ip_unprivileged_port_start, so a restarted boxd may listen
	// on it again although the sandbox's owner is not root.
	Admin bool `json:"admin,omitempty"`
}

// Why a recorded mapping is down (Mapping.Down).
const (
	DownInUse      = "in_use"      // something else held the host port
	DownPrivileged = "privileged"  // below ip_unprivileged_port_start, not an admin's
	DownNotAllowed = "not_allowed" // the daemon's settings no longer allow the host address
	DownFailed     = "failed"      // any other listen error
)

// DownReason explains a Down value to a user.
func DownReason(down string) string {
	switch down {
	case "":
		return ""
	case DownInUse:
		return "the host port was in use when boxd listened again after a restart; boxd does not retry: publish it again"
	case DownPrivileged:
		return "the host port is below net.ipv4.ip_unprivileged_port_start and was not published by an admin"
	case DownNotAllowed:
		return "this daemon's settings do not allow the host address (--allow-publish-address)"
	}
	return "boxd could not listen on the host port again after a restart; boxd does not retry: publish it again"
}

// Same reports whether m and o are the same mapping, whatever their
// record-only fields (Down, Admin).
func (m Mapping) Same(o Mapping) bool {
	return m.HostIP == o.HostIP && m.HostPort == o.HostPort && m.Port == o.Port && m.Protocol == o.Protocol
}

// UnprivilegedPortStart is the lowest port an unprivileged process may
// bind, read from the kernel at each call (the sysctl can change at any
// time); 1024, the kernel's default, if it cannot be read.
func UnprivilegedPortStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if err != nil {
		return 1024
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v < 0 {
		return 1024
	}
	return v
}

// HostAddr is where clients on the host connect, e.g. 127.0.0.1:34567.
func (m Mapping) HostAddr() string {
	return net.JoinHostPort(m.HostIP, strconv.Itoa(m.HostPort))
}

func (m Mapping) String() string {
	return fmt.Sprintf("%s->%d/%s", m.HostAddr(), m.Port, m.Protocol)
}

// Policy says which host addresses boxd may listen on for a sandbox.
// Loopback addresses are always allowed; any other only if the daemon was
// started with it (--allow-publish-address), because a port on another
// address is reachable from other machines.
type Policy struct {
	Allowed []netip.Addr
}

// FieldError names the part of a mapping that was wrong; it is an
// invalid-argument error.
type FieldError struct {
	Field string // host_ip, host_port, port or protocol
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }
func (e *FieldError) Unwrap() error { return errdefs.ErrInvalidArgument }

// Normalize checks m against the policy and fills in defaults: host address
// 127.0.0.1 and protocol tcp. HostPort 0 means a free port picked at Bind.
func (p Policy) Normalize(m Mapping) (Mapping, error) {
	m.Down, m.Admin = "", false
	if m.Protocol == "" {
		m.Protocol = ProtoTCP
	}
	if m.Protocol != ProtoTCP {
		return m, &FieldError{"protocol", fmt.Sprintf("%q is not supported (only tcp)", m.Protocol)}
	}
	if !wire.ValidPort(m.Port) {
		return m, &FieldError{"port", fmt.Sprintf("%d is outside 1-65535", m.Port)}
	}
	if m.HostPort < 0 || m.HostPort > 65535 {
		return m, &FieldError{"host_port", fmt.Sprintf("%d is outside 1-65535 (0: any free port)", m.HostPort)}
	}
	if m.HostIP == "" {
		m.HostIP = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(m.HostIP)
	if err != nil || ip.Zone() != "" {
		return m, &FieldError{"host_ip", fmt.Sprintf("%q is not an IP address", m.HostIP)}
	}
	ip = ip.Unmap()
	if !ip.IsLoopback() && !slices.Contains(p.Allowed, ip) {
		return m, &FieldError{"host_ip", fmt.Sprintf("%s is not a loopback address, and boxd was not started with --allow-publish-address %s", ip, ip)}
	}
	m.HostIP = ip.String()
	return m, nil
}

// Listener is a bound host port, not yet serving until Publisher.Serve.
type Listener struct {
	m  Mapping
	ln *net.TCPListener
}

// Bind listens for m (normalized) and returns it with the port the kernel
// gave if m.HostPort is 0. A port in use is failed-precondition.
func Bind(m Mapping) (*Listener, error) {
	ln, err := net.Listen("tcp", m.HostAddr())
	if err != nil {
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			return nil, &bindError{"host_port", fmt.Errorf("%s is already in use on the host: %w", m.HostAddr(), errdefs.ErrFailedPrecondition), true}
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			return nil, &bindError{"host_ip", fmt.Errorf("%s is not an address of this host: %w", m.HostIP, errdefs.ErrInvalidArgument), false}
		case errors.Is(err, syscall.EACCES):
			return nil, &bindError{"host_port", fmt.Errorf("%s: %v: %w", m.HostAddr(), err, errdefs.ErrFailedPrecondition), false}
		}
		return nil, &bindError{"host_port", fmt.Errorf("listen on %s: %w", m.HostAddr(), err), false}
	}
	tl := ln.(*net.TCPListener)
	m.HostPort = tl.Addr().(*net.TCPAddr).Port
	return &Listener{m: m, ln: tl}, nil
}

// bindError carries the field a failed Bind is about.
type bindError struct {
	field string
	err   error
	inUse bool // EADDRINUSE
}

func (e *bindError) Error() string { return e.err.Error() }
func (e *bindError) Unwrap() error { return e.err }

// BindField names the mapping field a Bind error is about ("host_port" or
// "host_ip"), or "" for other errors.
func BindField(err error) string {
	var be *bindError
	if errors.As(err, &be) {
		return be.field
	}
	return ""
}

// InUse reports whether a Bind error says the port is in use.
func InUse(err error) bool {
	var be *bindError
	return errors.As(err, &be) && be.inUse
}

// Mapping is what l serves, with its actual host port.
func (l *Listener) Mapping() Mapping { return l.m }

// Close stops listening (for a listener that never served).
func (l *Listener) Close() { l.ln.Close() }

// Dialer opens a connection to 127.0.0.1:port inside the sandbox (the
// init's OpDial, agent/host.Client.Dial).
type Dialer func(ctx context.Context, port int) (net.Conn, error)

// Bounds on the connections published ports carry at once; more are reset
// at accept. Each costs boxd two descriptors (the client's connection and
// the one to the init) and two goroutines for as long as both ends keep it
// open, and the sandbox's end is the sandbox's to keep open, while any
// local user may open the host's end. A sandbox may publish 32 ports
// (runtime.MaxPublish), so the per-port bound alone would let one sandbox
// hold 32,768 of boxd's descriptors: the sandbox and daemon bounds keep
// all published ports together within 2 x DefaultMaxTotalConns descriptors.
const (
	DefaultMaxConns        = 512  // per port
	DefaultMaxSandboxConns = 1024 // per sandbox, over all its ports
	DefaultMaxTotalConns   = 4096 // over every sandbox
)

// Publisher serves the published ports of every sandbox. It is safe for
// concurrent use.
type Publisher struct {
	Log             *slog.Logger
	MaxConns        int // per port; 0 means DefaultMaxConns
	MaxSandboxConns int // per sandbox; 0 means DefaultMaxSandboxConns
	MaxTotalConns   int // in all; 0 means DefaultMaxTotalConns

	mu        sync.Mutex
	bySandbox map[string][]*served
	sbSlots   map[string]chan struct{} // per sandbox, while it has ports
	total     chan struct{}
	gaveUp    map[string][]Mapping // by sandbox: recorded ports boxd will not listen on again
}

type served struct {
	l      *Listener
	dial   Dialer
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{} // this port's
	sbSlot chan struct{} // the sandbox's
	total  chan struct{} // the daemon's

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// Serve starts accepting on l for sandbox id; each connection is dialled
// into the sandbox with dial.
func (p *Publisher) Serve(id string, l *Listener, dial Dialer) {
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{l: l, dial: dial, log: log.With("sandbox", id, "port", l.m.String()), ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, orDefault(p.MaxConns, DefaultMaxConns)), conns: map[net.Conn]struct{}{}}
	p.mu.Lock()
	if p.bySandbox == nil {
		p.bySandbox = map[string][]*served{}
		p.sbSlots = map[string]chan struct{}{}
		p.total = make(chan struct{}, orDefault(p.MaxTotalConns, DefaultMaxTotalConns))
	}
	if p.sbSlots[id] == nil {
		p.sbSlots[id] = make(chan struct{}, orDefault(p.MaxSandboxConns, DefaultMaxSandboxConns))
	}
	s.sbSlot, s.total = p.sbSlots[id], p.total
	p.bySandbox[id] = append(p.bySandbox[id], s)
	p.mu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop()
}

// GiveUp records that boxd will not listen on m of sandbox id again by
// itself (its listen failed); GaveUp asks. Release of all of id's ports
// forgets it.
func (p *Publisher) GiveUp(id string, m Mapping) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gaveUp == nil {
		p.gaveUp = map[string][]Mapping{}
	}
	p.gaveUp[id] = append(p.gaveUp[id], m)
}

// GaveUp reports whether GiveUp was called for m of sandbox id.
func (p *Publisher) GaveUp(id string, m Mapping) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.gaveUp[id], m.Same)
}

// Forget drops what GiveUp recorded for ports of id that match.
func (p *Publisher) Forget(id string, match func(Mapping) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	left := slices.DeleteFunc(p.gaveUp[id], match)
	if len(left) == 0 {
		delete(p.gaveUp, id)
		return
	}
	p.gaveUp[id] = left
}

// Published lists what sandbox id has listening now.
func (p *Publisher) Published(id string) []Mapping {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Mapping
	for _, s := range p.bySandbox[id] {
		out = append(out, s.l.m)
	}
	return out
}

// Release stops the ports of sandbox id for which match is true (all if
// match is nil), ends their connections, and returns what it stopped. It
// returns once nothing of them is left.
func (p *Publisher) Release(id string, match func(Mapping) bool) []Mapping {
	p.mu.Lock()
	var stop, keep []*served
	for _, s := range p.bySandbox[id] {
		if match == nil || match(s.l.m) {
			stop = append(stop, s)
		} else {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		delete(p.bySandbox, id)
		delete(p.sbSlots, id) // connections still ending hold their own reference
		if match == nil {
			delete(p.gaveUp, id)
		}
	} else {
		p.bySandbox[id] = keep
	}
	p.mu.Unlock()
	var out []Mapping
	for _, s := range stop {
		s.close()
		out = append(out, s.l.m)
	}
	return out
}

func (s *served) close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	s.cancel()
	s.l.ln.Close()
	for c := range conns {
		c.Close()
	}
	s.wg.Wait()
}

// track records c so close can end it; false if the port is closing.
func (s *served) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *served) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

func (s *served) acceptLoop() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		c, err := s.l.ln.AcceptTCP()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, or a connection reset before accept.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("published port: accept", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if !s.acquire() {
			reset(c)
			continue
		}
		if !s.track(c) {
			s.releaseSlots()
			reset(c)
			return
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// acquire takes a connection slot of the port, the sandbox and the daemon,
// or none.
func (s *served) acquire() bool {
	for i, sem := range []chan struct{}{s.slots, s.sbSlot, s.total} {
		select {
		case sem <- struct{}{}:
			continue
		default:
		}
		for _, held := range []chan struct{}{s.slots, s.sbSlot}[:i] {
			<-held
		}
		what := [...]string{"port", "sandbox", "daemon"}[i]
		s.log.Warn("published port: connection limit reached; resetting a new connection", "limit_of", what, "max", cap(sem))
		return false
	}
	return true
}

func (s *served) releaseSlots() {
	<-s.total
	<-s.sbSlot
	<-s.slots
}

// reset closes c with an RST, which a client sees at once as "connection
// reset": the same answer as a port nothing listens on.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	c.Close()
}

func (s *served) serveConn(c *net.TCPConn) {
	defer s.wg.Done()
	defer s.releaseSlots()
	defer s.untrack(c)
	in, err := s.dial(s.ctx, s.l.m.Port)
	if err != nil {
		s.log.Debug("published port: sandbox side refused", "err", err)
		reset(c)
		return
	}
	if !s.track(in) {
		in.Close()
		reset(c)
		return
	}
	defer s.untrack(in)
	wire.Splice(c, in)
}
