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
	"slices"
	"strconv"
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
			return nil, &bindError{"host_port", fmt.Errorf("%s is already in use on the host: %w", m.HostAddr(), errdefs.ErrFailedPrecondition)}
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			return nil, &bindError{"host_ip", fmt.Errorf("%s is not an address of this host: %w", m.HostIP, errdefs.ErrInvalidArgument)}
		case errors.Is(err, syscall.EACCES):
			return nil, &bindError{"host_port", fmt.Errorf("%s: %v: %w", m.HostAddr(), err, errdefs.ErrFailedPrecondition)}
		}
		return nil, &bindError{"host_port", fmt.Errorf("listen on %s: %w", m.HostAddr(), err)}
	}
	tl := ln.(*net.TCPListener)
	m.HostPort = tl.Addr().(*net.TCPAddr).Port
	return &Listener{m: m, ln: tl}, nil
}

// bindError carries the field a failed Bind is about.
type bindError struct {
	field string
	err   error
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

// Mapping is what l serves, with its actual host port.
func (l *Listener) Mapping() Mapping { return l.m }

// Close stops listening (for a listener that never served).
func (l *Listener) Close() { l.ln.Close() }

// Dialer opens a connection to 127.0.0.1:port inside the sandbox (the
// init's OpDial, agent/host.Client.Dial).
type Dialer func(ctx context.Context, port int) (net.Conn, error)

// DefaultMaxConns is how many connections one published port carries at
// once; more are reset at accept. Each costs boxd two descriptors and two
// goroutines for as long as both ends keep it open, and the sandbox's end
// is the sandbox's to keep open.
const DefaultMaxConns = 512

// Publisher serves the published ports of every sandbox. It is safe for
// concurrent use.
type Publisher struct {
	Log      *slog.Logger
	MaxConns int // per port; 0 means DefaultMaxConns

	mu        sync.Mutex
	bySandbox map[string][]*served
}

type served struct {
	l      *Listener
	dial   Dialer
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every connection
}

// Serve starts accepting on l for sandbox id; each connection is dialled
// into the sandbox with dial.
func (p *Publisher) Serve(id string, l *Listener, dial Dialer) {
	log := p.Log
	if log == nil {
		log = slog.Default()
	}
	max := p.MaxConns
	if max <= 0 {
		max = DefaultMaxConns
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{l: l, dial: dial, log: log.With("sandbox", id, "port", l.m.String()), ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, max), conns: map[net.Conn]struct{}{}}
	p.mu.Lock()
	if p.bySandbox == nil {
		p.bySandbox = map[string][]*served{}
	}
	p.bySandbox[id] = append(p.bySandbox[id], s)
	p.mu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop()
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
		select {
		case s.slots <- struct{}{}:
		default:
			s.log.Warn("published port: connection limit reached; resetting a new connection", "max", cap(s.slots))
			reset(c)
			continue
		}
		if !s.track(c) {
			<-s.slots
			reset(c)
			return
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// reset closes c with an RST, which a client sees at once as "connection
// reset": the same answer as a port nothing listens on.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	c.Close()
}

func (s *served) serveConn(c *net.TCPConn) {
	defer s.wg.Done()
	defer func() { <-s.slots }()
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
