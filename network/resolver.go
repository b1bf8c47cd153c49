package network

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// Bounds on how long an answer's addresses stay in a sandbox's allowed set:
// at least long enough to connect (a TTL of 0 would mean "forever" to
// nftables), at most a day.
const (
	minAdmit = 30 * time.Second
	maxAdmit = 24 * time.Hour
)

// resolver is the DNS server egress sandboxes use (their resolv.conf names
// the gateway). It tells sandboxes apart by source address (which sandbox
// root cannot forge: see nft.go), answers only names on the asking
// sandbox's allowlist, forwards those upstream, and adds the addresses of
// each answer to that sandbox's allowed set for the answer's TTL. Names not
// allowed get NXDOMAIN, queries from elsewhere REFUSED.
type resolver struct {
	m        *Manager
	upstream string
	log      *slog.Logger
	udp, tcp *dns.Server
	lim      *dnsLimits // see resolver_limits.go
}

// upstreamFrom is addr with a default port, or the first nameserver of
// /etc/resolv.conf.
func upstreamFrom(addr string) (string, error) {
	if addr == "" {
		cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(cc.Servers) == 0 {
			return "", fmt.Errorf("dns-upstream: none given and none in /etc/resolv.conf (%v)", err)
		}
		return net.JoinHostPort(cc.Servers[0], cc.Port), nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "53")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("dns-upstream %q: %w", addr, err)
	}
	return addr, nil
}

// freebind lets the resolver bind the gateway's address before the CNI
// bridge plugin has put it on the bridge.
func freebind(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
	if err != nil {
		return err
	}
	return serr
}

// start listens on the gateway's port 53 (UDP and TCP).
func (r *resolver) start(gw netip.Addr) error {
	addr := netip.AddrPortFrom(gw, 53).String()
	lc := net.ListenConfig{Control: freebind}
	pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return fmt.Errorf("dns: listen udp %s: %w", addr, err)
	}
	ln, err := lc.Listen(context.Background(), "tcp4", addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("dns: listen tcp %s: %w", addr, err)
	}
	r.lim = newDNSLimits()
	r.udp = &dns.Server{PacketConn: pc, Handler: r}
	r.tcp = &dns.Server{Listener: &limitedListener{Listener: ln, lim: r.lim}, Handler: r,
		IdleTimeout: func() time.Duration { return DNSIdleTimeout }}
	go func() { _ = r.udp.ActivateAndServe() }()
	go func() { _ = r.tcp.ActivateAndServe() }()
	return nil
}

func (r *resolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	done, ok := r.admitQuery(w, q)
	if !ok {
		return
	}
	defer done()
	resp := r.answer(w, q)
	_ = w.WriteMsg(resp)
}

func (r *resolver) answer(w dns.ResponseWriter, q *dns.Msg) *dns.Msg {
	resp := new(dns.Msg)
	src, ok := netip.AddrFromSlice(addrIP(w.RemoteAddr()))
	mb := r.m.member(src.Unmap())
	if !ok || mb == nil || q.Opcode != dns.OpcodeQuery || len(q.Question) != 1 {
		return resp.SetRcode(q, dns.RcodeRefused)
	}
	qn := strings.ToLower(strings.TrimSuffix(q.Question[0].Name, "."))
	ports, allowed := allowedPorts(mb.allow, qn)
	if !allowed {
		r.log.Debug("dns: name not allowed", "sandbox", mb.id, "name", qn)
		r.m.deny.add(mb.id, DenyRecord{Dest: SanitizeName(qn), Port: 53, Proto: "dns", Reason: ReasonNameNotAllowed})
		return resp.SetRcode(q, dns.RcodeNameError)
	}
	if _, bound := r.m.secretsFor(mb.id, qn); len(bound) > 0 {
		return r.brokerAnswer(q)
	}
	v6 := mb.addr6.IsValid()
	if q.Question[0].Qtype == dns.TypeAAAA && !v6 {
		// No IPv6 for this sandbox: no IPv6 answers, so clients use IPv4.
		return resp.SetReply(q)
	}
	up, err := r.forward(q, w.RemoteAddr().Network())
	if err != nil {
		r.log.Warn("dns: upstream", "sandbox", mb.id, "name", qn, "err", err)
		return resp.SetRcode(q, dns.RcodeServerFailure)
	}
	// Records of non-unicast and always-blocked addresses leave the answer.
	addrs, ttl := r.m.screenAnswer(mb.allow, up, v6)
	if len(addrs) > 0 {
		ttl = max(ttl, minAdmit)
		if err := r.m.admit(mb.id, addrs, ports, ttl); err != nil {
			r.log.Warn("dns: admit", "sandbox", mb.id, "name", qn, "err", err)
			return resp.SetRcode(q, dns.RcodeServerFailure)
		}
		r.log.Debug("dns: admitted", "sandbox", mb.id, "name", qn, "addrs", addrs, "ports", ports, "for", ttl)
	}
	up.Id = q.Id
	return up
}

// forward asks upstream over the client's transport; a truncated UDP
// answer is asked again over TCP.
func (r *resolver) forward(q *dns.Msg, network string) (*dns.Msg, error) {
	if r.upstream == "" {
		return nil, fmt.Errorf("no dns-upstream configured")
	}
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	if network == "tcp" {
		c.Net = "tcp"
	}
	in, _, err := c.Exchange(q, r.upstream)
	if err == nil && in.Truncated && c.Net == "udp" {
		c.Net = "tcp"
		in, _, err = c.Exchange(q, r.upstream)
	}
	return in, err
}

// allowedPorts says whether name is on the allowlist ("*" allows every
// name) and on which ports its addresses may be reached: nil means every
// port.
func allowedPorts(allow []Dest, name string) ([]uint16, bool) {
	var ports []uint16
	ok := false
	for _, d := range allow {
		if !d.Any && d.Name == "" || !d.MatchName(name) {
			continue
		}
		if d.Port == 0 {
			return nil, true
		}
		ok = true
		ports = append(ports, d.Port)
	}
	return ports, ok
}

func addrIP(a net.Addr) net.IP {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.IP
	case *net.TCPAddr:
		return a.IP
	}
	return nil
}
