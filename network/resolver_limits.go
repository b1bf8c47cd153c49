package network

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Bounds on what sandboxes can make the resolver hold. Its TCP port is
// reachable by every egress sandbox's root, and each connection is a
// descriptor of boxd's (and a goroutine) for as long as the sandbox keeps
// it open: without bounds a sandbox could take boxd's descriptors, and
// with them every API call, sandbox and published port of the daemon.
// Queries beyond a bound are answered REFUSED at once (never forwarded);
// connections beyond one are reset at accept.
const (
	// DNSMaxConnsPerSandbox is the TCP connections one source address (one
	// sandbox: it cannot forge its address) may hold to the resolver.
	DNSMaxConnsPerSandbox = 64
	// DNSMaxConns is the TCP connections all sources together may hold.
	DNSMaxConns = 4096
	// DNSIdleTimeout closes a TCP connection with no query for this long
	// (a query must also arrive whole within it).
	DNSIdleTimeout = 10 * time.Second
	// DNSQueriesPerSecond is each sandbox's query rate, UDP and TCP
	// together, with a burst of as many.
	DNSQueriesPerSecond = 200
	// DNSMaxInFlightPerSandbox and DNSMaxInFlight bound the queries being
	// answered at once (each forwarded one holds an upstream socket for up
	// to 5 s): per sandbox and in all.
	DNSMaxInFlightPerSandbox = 32
	DNSMaxInFlight           = 1024
)

// dnsLimits counts, per source address, the resolver's TCP connections,
// its queries in flight and a token bucket of its query rate.
type dnsLimits struct {
	mu          sync.Mutex
	bySrc       map[netip.Addr]*srcUse
	conns       int
	inFlight    int
	lastSweep   time.Time
	now         func() time.Time // time.Now; tests replace it
	perSrcConns int              // DNSMaxConnsPerSandbox unless a test sets it
	totalConns  int              // DNSMaxConns unless a test sets it
}

type srcUse struct {
	conns, inFlight int
	tokens          float64
	at              time.Time // when tokens was last filled
}

func newDNSLimits() *dnsLimits {
	return &dnsLimits{bySrc: map[netip.Addr]*srcUse{}, now: time.Now, perSrcConns: DNSMaxConnsPerSandbox, totalConns: DNSMaxConns}
}

// use returns src's entry, made full; idle entries (no connection, no
// query in flight, bucket full again) are swept now and then, so sources
// that went away cost nothing. Call with mu held.
func (l *dnsLimits) use(src netip.Addr, now time.Time) *srcUse {
	if now.Sub(l.lastSweep) > 10*time.Second {
		l.lastSweep = now
		for a, u := range l.bySrc {
			if u.conns == 0 && u.inFlight == 0 && now.Sub(u.at) > time.Second {
				delete(l.bySrc, a)
			}
		}
	}
	u := l.bySrc[src]
	if u == nil {
		u = &srcUse{tokens: DNSQueriesPerSecond, at: now}
		l.bySrc[src] = u
	}
	return u
}

// openConn admits a TCP connection from src, or says no.
func (l *dnsLimits) openConn(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.use(src, l.now())
	if l.conns >= l.totalConns || u.conns >= l.perSrcConns {
		return false
	}
	u.conns++
	l.conns++
	return true
}

func (l *dnsLimits) closeConn(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.bySrc[src]; u != nil && u.conns > 0 {
		u.conns--
		l.conns--
	}
}

// startQuery admits a query from src (its rate and the queries in flight),
// or says no; an admitted query must call endQuery.
func (l *dnsLimits) startQuery(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	u := l.use(src, now)
	u.tokens = min(DNSQueriesPerSecond, u.tokens+now.Sub(u.at).Seconds()*DNSQueriesPerSecond)
	u.at = now
	if u.tokens < 1 || u.inFlight >= DNSMaxInFlightPerSandbox || l.inFlight >= DNSMaxInFlight {
		return false
	}
	u.tokens--
	u.inFlight++
	l.inFlight++
	return true
}

func (l *dnsLimits) endQuery(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.bySrc[src]; u != nil && u.inFlight > 0 {
		u.inFlight--
		l.inFlight--
	}
}

// limitedListener is the resolver's TCP listener with the connection
// bounds: a connection over them is reset as soon as it is accepted.
type limitedListener struct {
	net.Listener
	lim *dnsLimits
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := srcAddr(c.RemoteAddr())
		if !ln.lim.openConn(src) {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, release: sync.OnceFunc(func() { ln.lim.closeConn(src) })}, nil
	}
}

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

func srcAddr(a net.Addr) netip.Addr {
	ip, _ := netip.AddrFromSlice(addrIP(a))
	return ip.Unmap()
}

// admitQuery applies the query bounds to q: over them it answers REFUSED
// and returns false; otherwise done must be called once q is answered.
func (r *resolver) admitQuery(w dns.ResponseWriter, q *dns.Msg) (done func(), ok bool) {
	src := srcAddr(w.RemoteAddr())
	if !r.lim.startQuery(src) {
		r.log.Debug("dns: query over the sandbox's rate or in-flight bound: refused", "src", src)
		_ = w.WriteMsg(new(dns.Msg).SetRcode(q, dns.RcodeRefused))
		return nil, false
	}
	return func() { r.lim.endQuery(src) }, true
}
