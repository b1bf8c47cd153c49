package network

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/boxd-dev/boxd/internal/secrets"
)

// The secret broker. A sandbox given a secret holds a placeholder; the
// resolver answers the names the secret is bound to with the gateway's
// address, where this proxy listens (443 for TLS, 80 for plain HTTP). It
// tells sandboxes apart by source address, as the resolver does. For TLS
// it shows a leaf of boxd's secrets CA (which such sandboxes trust) only
// when the ClientHello's name is a host bound to one of the sandbox's
// secrets, and replaces a placeholder only when that name, the request's
// Host and the upstream name are the same bound host; it then dials the
// host by name, through the resolver's upstream and the always-blocked
// screen, and verifies its certificate against the host's store and the
// secret's upstream CA. Everything else leaves untouched or is refused.

// Bounds on what a sandbox can make the proxy hold.
const (
	BrokerHeaderTimeout = 10 * time.Second // the handshake and a request's header, whole
	BrokerIdleTimeout   = 60 * time.Second
	BrokerMaxHeader     = 64 << 10
	BrokerDialTimeout   = 10 * time.Second
)

// ReasonSecretHost is a deny-log reason: a request to the proxy for a
// host the sandbox has no secret for, or may not reach.
const ReasonSecretHost = "secret_host"

// Brokered is one secret a sandbox was given: what its label keeps.
type Brokered struct {
	Name        string   `json:"name"`
	Env         string   `json:"env"`
	Placeholder string   `json:"placeholder"`
	Hosts       []string `json:"hosts"`
}

// brokered is a sandbox's secrets and their owner.
type brokered struct {
	owner uint32
	list  []Brokered
}

// SetSecrets records the secrets sandbox id (owned by owner) was given;
// nil forgets them. It may come before the sandbox's attach.
func (m *Manager) SetSecrets(id string, owner uint32, list []Brokered) {
	m.mu.Lock()
	old := m.secrets[id]
	if len(list) == 0 {
		delete(m.secrets, id)
	} else {
		m.secrets[id] = &brokered{owner: owner, list: slices.Clone(list)}
	}
	br := m.broker
	m.mu.Unlock()
	if old != nil && br != nil {
		// Its clients go; the next request dials again.
		cas := []string{""}
		for _, s := range old.list {
			if sec, err := m.cfg.Secrets.Get(old.owner, s.Name); err == nil {
				cas = append(cas, sec.UpstreamCA)
			}
		}
		br.forget(id, cas)
	}
}

// Brokering says whether this boxd can broker secrets (it has a CA and a
// store).
func (m *Manager) Brokering() bool { return m.cfg.CA != nil && m.cfg.Secrets != nil }

// secretsFor is sandbox id's secrets bound to host, and their owner.
func (m *Manager) secretsFor(id, host string) (uint32, []Brokered) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.secrets[id]
	if b == nil {
		return 0, nil
	}
	var out []Brokered
	for _, s := range b.list {
		if slices.Contains(s.Hosts, host) {
			out = append(out, s)
		}
	}
	return b.owner, out
}

// brokerAnswer is the resolver's answer for a name bound to one of the
// asking sandbox's secrets: the gateway, where the proxy listens.
func (r *resolver) brokerAnswer(q *dns.Msg) *dns.Msg {
	resp := new(dns.Msg).SetReply(q)
	if q.Question[0].Qtype == dns.TypeA {
		resp.Answer = append(resp.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA,
			Class: dns.ClassINET, Ttl: 60}, A: r.m.fw.gw.AsSlice()})
	}
	return resp
}

type broker struct {
	m       *Manager
	srvs    []*http.Server
	mu      sync.Mutex
	clients map[[32]byte]*http.Client // by sandbox and upstream CA
	roots   *x509.CertPool
}

// startBroker listens on the gateway's ports 443 and 80.
func (m *Manager) startBroker() error {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	b := &broker{m: m, clients: map[[32]byte]*http.Client{}, roots: roots}
	lim := newDNSLimits() // the same per-sandbox and total connection bounds
	for _, port := range []int{443, 80} {
		addr := netip.AddrPortFrom(m.fw.gw, uint16(port)).String()
		ln, err := (&net.ListenConfig{Control: freebind}).Listen(context.Background(), "tcp4", addr)
		if err != nil {
			b.close()
			return fmt.Errorf("secret broker: listen %s: %w", addr, err)
		}
		srv := &http.Server{Handler: b, ReadHeaderTimeout: BrokerHeaderTimeout, IdleTimeout: BrokerIdleTimeout,
			MaxHeaderBytes: BrokerMaxHeader, ErrorLog: log.New(io.Discard, "", 0)}
		lln := &limitedListener{Listener: ln, lim: lim}
		if port == 443 {
			srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, GetCertificate: b.certificate}
			go func() { _ = srv.ServeTLS(lln, "", "") }()
		} else {
			go func() { _ = srv.Serve(lln) }()
		}
		b.srvs = append(b.srvs, srv)
	}
	m.broker = b
	return nil
}

// forget closes and drops sandbox id's upstream clients.
func (b *broker) forget(id string, cas []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ca := range cas {
		if c := b.clients[clientKey(id, ca)]; c != nil {
			c.CloseIdleConnections()
			delete(b.clients, clientKey(id, ca))
		}
	}
}

func (b *broker) close() {
	for _, s := range b.srvs {
		_ = s.Close()
	}
}

// certificate shows a leaf for the ClientHello's name only if that name
// is bound to a secret of the sandbox asking: any other handshake fails,
// so the proxy never poses as a host it has nothing to add to.
func (b *broker) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	host := strings.ToLower(hello.ServerName)
	mb := b.m.member(srcAddr(hello.Conn.RemoteAddr()))
	if mb == nil {
		return nil, errors.New("not an egress sandbox")
	}
	if _, bound := b.m.secretsFor(mb.id, host); len(bound) == 0 {
		b.m.deny.add(mb.id, DenyRecord{Dest: SanitizeName(host), Port: 443, Proto: "tcp", Reason: ReasonSecretHost})
		return nil, fmt.Errorf("no secret of sandbox %s is bound to %q", mb.id, host)
	}
	return b.m.cfg.CA.Leaf(host)
}

func (b *broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mb := b.m.member(srcAddr(addrOf(r.RemoteAddr)))
	if mb == nil {
		http.Error(w, "boxd: not an egress sandbox", http.StatusForbidden)
		return
	}
	host, port := strings.ToLower(r.Host), uint16(80)
	if h, p, err := net.SplitHostPort(r.Host); err == nil {
		host = strings.ToLower(h)
		if p != "80" && p != "443" {
			host = "" // the proxy only listens on 80 and 443
		}
	}
	if r.TLS != nil {
		port = 443
		if host != strings.ToLower(r.TLS.ServerName) {
			// Domain fronting: the handshake named one host, the request
			// another.
			http.Error(w, "boxd: the request's Host is not the TLS server name", http.StatusMisdirectedRequest)
			return
		}
	}
	owner, bound := b.m.secretsFor(mb.id, host)
	ports, ok := allowedPorts(mb.allow, host)
	if len(bound) == 0 || !ok || ports != nil && !slices.Contains(ports, port) {
		b.m.deny.add(mb.id, DenyRecord{Dest: SanitizeName(host), Port: port, Proto: "tcp", Reason: ReasonSecretHost})
		http.Error(w, "boxd: no secret bound to this host, or the host is not allowed", http.StatusForbidden)
		return
	}
	var ca string
	for _, s := range bound {
		sec, err := b.m.cfg.Secrets.Get(owner, s.Name)
		if err != nil || !slices.Contains(sec.Hosts, host) {
			continue // removed, or bound elsewhere now: the placeholder stays
		}
		ca = sec.UpstreamCA
		if r.TLS != nil || sec.AllowHTTP {
			substitute(r.Header, sec, s.Placeholder)
		}
	}
	b.forward(w, r, mb, host, port, ca)
}

// substitute puts sec's value in place of placeholder in sec's header,
// and nowhere else.
func substitute(h http.Header, sec *secrets.Secret, placeholder string) {
	vals := h.Values(sec.Header)
	for i, v := range vals {
		if !strings.Contains(v, placeholder) {
			continue
		}
		if sec.Format != "" {
			vals[i] = strings.Replace(sec.Format, "{}", sec.Value, 1)
		} else {
			vals[i] = strings.ReplaceAll(v, placeholder, sec.Value)
		}
	}
}

type memberKey struct{}

// forward sends r to host:port, dialled by name, and copies the answer back.
func (b *broker) forward(w http.ResponseWriter, r *http.Request, mb *member, host string, port uint16, ca string) {
	scheme := "http"
	if port == 443 {
		scheme = "https"
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = scheme, net.JoinHostPort(host, strconv.Itoa(int(port))), host
		},
		Transport: b.client(mb.id, ca).Transport,
		ErrorLog:  log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			b.m.log.Info("secret broker: upstream", "sandbox", mb.id, "host", host, "err", err)
			http.Error(w, "boxd: upstream "+host+" failed (its certificate, address or answer)", http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), memberKey{}, mb)))
}

func clientKey(id, ca string) [32]byte { return sha256.Sum256([]byte(id + "\x00" + ca)) }

// client is sandbox id's upstream client that trusts the host's store
// plus ca. Each sandbox has its own (its connections were dialled under
// its allowlist's screen), dropped with its secrets (forget).
func (b *broker) client(id, ca string) *http.Client {
	key := clientKey(id, ca)
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.clients[key]; c != nil {
		return c
	}
	roots := b.roots.Clone()
	if ca != "" {
		roots.AppendCertsFromPEM([]byte(ca))
	}
	tr := &http.Transport{
		DialContext:            b.dial,
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    BrokerDialTimeout,
		ResponseHeaderTimeout:  60 * time.Second,
		IdleConnTimeout:        30 * time.Second,
		MaxIdleConnsPerHost:    8,
		MaxResponseHeaderBytes: 1 << 20,
	}
	c := &http.Client{Transport: tr}
	b.clients[key] = c
	return c
}

// dial resolves the upstream name as the sandbox's own lookup would
// (upstream resolver, always-blocked screen) and connects to an answer.
func (b *broker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	mb, _ := ctx.Value(memberKey{}).(*member)
	host, port, err := net.SplitHostPort(addr)
	if err != nil || mb == nil {
		return nil, fmt.Errorf("secret broker: dial %s: no sandbox", addr)
	}
	q := new(dns.Msg).SetQuestion(dns.Fqdn(host), dns.TypeA)
	up, err := b.m.dns.forward(q, "udp")
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	addrs, _ := b.m.screenAnswer(mb.allow, up, false)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no address a sandbox may reach", host)
	}
	d := net.Dialer{Timeout: BrokerDialTimeout}
	return d.DialContext(ctx, "tcp4", net.JoinHostPort(addrs[0].String(), port))
}

func addrOf(s string) net.Addr {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}

// SecretStore is the secrets this boxd keeps, or nil.
func (m *Manager) SecretStore() *secrets.Store { return m.cfg.Secrets }

// SecretsCA is the CA of the broker's leaves, or nil.
func (m *Manager) SecretsCA() *secrets.CA { return m.cfg.CA }
