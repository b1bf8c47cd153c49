//go:build linux

package rpc

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// selfSigned is a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func tlsClient(pool *x509.CertPool, token string) *http.Client {
	proto := new(http.Protocols)
	proto.SetHTTP2(true)
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: proto}
	if token != "" {
		rt = authRT{"Bearer " + token, rt}
	}
	return apiwire.ClientOver(rt)
}

type authRT struct {
	v    string
	next http.RoundTripper
}

func (a authRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", a.v)
	return a.next.RoundTrip(r)
}

// TestRemoteListener: the TLS listener serves the API (Connect and gRPC
// over HTTP/2) to callers with a token only, health included; a token's
// scope bounds its calls; a revoked token fails on a kept connection; a
// client that never finishes the TLS handshake is cut off.
func TestRemoteListener(t *testing.T) {
	dir := t.TempDir()
	ts, err := OpenTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, write, _ := ts.Create("w", 0, ScopeWrite, time.Hour)
	_, read, _ := ts.Create("r", 0, ScopeRead, time.Hour)
	cert, pool := selfSigned(t)
	uln, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tokens: ts, IdleTimeout: time.Second,
		Remote: []RemoteListener{{Listener: tln, TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, uln) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "https://" + tln.Addr().String()
	cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()

	for token, want := range map[string]connect.Code{"": connect.CodeUnauthenticated, "boxd_nope": connect.CodeUnauthenticated, write: 0} {
		_, err := grpchealth.NewClient(tlsClient(pool, token), url, connect.WithGRPC()).Check(cctx, &grpchealth.CheckRequest{})
		if connect.CodeOf(err) != want && !(want == 0 && err == nil) {
			t.Errorf("health with token %.10q: %v, want %v", token, err, want)
		}
	}
	w := boxdv1connect.NewTokenServiceClient(tlsClient(pool, write), url)
	if resp, err := w.ListTokens(cctx, connect.NewRequest(&boxdv1.ListTokensRequest{})); err != nil || len(resp.Msg.Tokens) != 2 {
		t.Fatalf("list over TLS: %v %v", resp, err)
	}
	r := boxdv1connect.NewTokenServiceClient(tlsClient(pool, read), url, connect.WithGRPC())
	_, err = r.CreateToken(cctx, connect.NewRequest(&boxdv1.CreateTokenRequest{Name: "x"}))
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("read token creates a token: %v", err)
	}
	if _, err := w.DeleteToken(cctx, connect.NewRequest(&boxdv1.DeleteTokenRequest{Name: "w"})); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ListTokens(cctx, connect.NewRequest(&boxdv1.ListTokensRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("revoked token: %v", err)
	}

	// A client that connects and never says hello is cut off.
	c, err := net.Dial("tcp", tln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF || time.Since(start) > 5*time.Second {
		t.Errorf("stalled handshake: %v after %v, want EOF within the header timeout", err, time.Since(start))
	}
}

// TestRemotePlainLoopback: a listener without TLS (loopback only, which
// cmd/boxd checks) speaks HTTP/2 without TLS, streams included, and still
// needs a token.
func TestRemotePlainLoopback(t *testing.T) {
	dir := t.TempDir()
	ts, err := OpenTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, write, _ := ts.Create("w", 0, ScopeWrite, time.Hour)
	uln, err := net.Listen("unix", filepath.Join(dir, "s.sock"))
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tokens: ts, Remote: []RemoteListener{{Listener: tln}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, uln) }()
	t.Cleanup(func() { cancel(); <-done })
	u, _ := url.Parse("http://" + tln.Addr().String())
	cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()
	// Reflection is a bidirectional stream.
	stream := grpcreflect.NewClient(apiwire.RemoteClient(u, write, nil), u.String()).NewStream(cctx)
	names, err := stream.ListServices()
	if err != nil || len(names) != len(APIServices)+3 {
		t.Errorf("reflection over plain HTTP/2: %v %v", names, err)
	}
	// The open stream ends within the recheck once its token is revoked.
	if err := ts.Delete("w", 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(tokenRecheck + time.Second)
	if _, err := stream.ListServices(); err == nil {
		t.Error("a stream outlived its revoked token")
	}
	_, err = grpcreflect.NewClient(apiwire.RemoteClient(u, "boxd_nope", nil), u.String()).NewStream(cctx).ListServices()
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("reflection with a wrong token: %v", err)
	}
}

// TestRemoteConnectionCap: --max-connections bounds each TCP listener on
// its own count: over it a call is answered resource_exhausted over TLS,
// naming the flag, while the socket still serves; a slot given back
// serves again.
func TestRemoteConnectionCap(t *testing.T) {
	dir := t.TempDir()
	ts, err := OpenTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, write, _ := ts.Create("w", 0, ScopeWrite, time.Hour)
	cert, pool := selfSigned(t)
	sock := filepath.Join(dir, "s.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tokens: ts, MaxConns: 1,
		Remote: []RemoteListener{{Listener: tln, TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, uln) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "https://" + tln.Addr().String()
	cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()
	// call makes a call on tr's connection.
	call := func(tr *http.Transport) error {
		hc := apiwire.ClientOver(authRT{"Bearer " + write, tr})
		_, err := boxdv1connect.NewTokenServiceClient(hc, url).ListTokens(cctx, connect.NewRequest(&boxdv1.ListTokensRequest{}))
		return err
	}
	newTransport := func() *http.Transport {
		proto := new(http.Protocols)
		proto.SetHTTP2(true)
		return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: proto}
	}
	check := func() error { // on a connection of its own, closed after
		tr := newTransport()
		defer tr.CloseIdleConnections()
		return call(tr)
	}
	if err := check(); err != nil {
		t.Fatalf("under the cap: %v", err)
	}
	// held takes the one slot, once the first call's connection has
	// given it back; its connection stays open.
	held := newTransport()
	var last error
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); time.Sleep(50 * time.Millisecond) {
		held.CloseIdleConnections() // a refused connection is not kept
		if last = call(held); last == nil {
			break
		}
	}
	if last != nil {
		t.Fatalf("a second connection after the first closed: %v", last)
	}
	last = check()
	if connect.CodeOf(last) != connect.CodeResourceExhausted || !strings.Contains(last.Error(), "max-connections") {
		t.Errorf("over the TCP listener's cap: %v, want resource_exhausted naming max-connections", last)
	}
	if code, body, err := post(sock); code == http.StatusTooManyRequests || err != nil {
		t.Errorf("the socket while the TCP listener is full: %d %s %v", code, body, err)
	}
	held.CloseIdleConnections()
	for wait := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if last = check(); last == nil {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("after the held connection closed: %v", last)
		}
	}
}
