package mcpserver

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// MinTokenLen is the shortest bearer token ReadTokenFile accepts: a token
// a person typed (a word, a PIN) can be guessed over the network.
const MinTokenLen = 16

// NewToken is a fresh bearer token: 32 random bytes, hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating the bearer token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ReadTokenFile reads a bearer token (the file's content without the
// surrounding white space) from path, which must be a regular file owned
// by the caller that neither group nor others may read or write: anyone
// who can read the token acts on boxd as this user, and anyone who can
// write it chooses the token.
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	defer f.Close()
	// The checks are on the open file, the one read below, whatever the
	// name points to by then.
	if err := privateFile(f, path, "--token-file"); err != nil {
		return "", err
	}
	b := make([]byte, 4097)
	n, err := f.Read(b)
	if err != nil {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	if n > 4096 {
		return "", fmt.Errorf("--token-file %s: longer than 4096 bytes: not a token", path)
	}
	tok := strings.TrimSpace(string(b[:n]))
	if len(tok) < MinTokenLen || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", fmt.Errorf("--token-file %s: the token must be at least %d printable ASCII characters without spaces", path, MinTokenLen)
	}
	return tok, nil
}

// WriteTokenFile writes tok to path with mode 0600, replacing a file of
// the caller's that is there. It refuses a symbolic link or a file
// someone else owns (another user's file in a shared directory would
// keep its owner's access to the token).
func WriteTokenFile(path, tok string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("--token-out %s: %w", path, err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("--token-out %s: %w", path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || int(st.Uid) != os.Getuid() {
		return fmt.Errorf("--token-out %s: not a regular file of user %d", path, os.Getuid())
	}
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("--token-out %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("--token-out %s: %w", path, err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		return fmt.Errorf("--token-out %s: %w", path, err)
	}
	return f.Close()
}

// privateFile refuses f unless it is a regular file of the caller's with
// no access for group or others.
func privateFile(f *os.File, path, flag string) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fmt.Errorf("%s %s: not a regular file", flag, path)
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s %s: owned by user %d, not by user %d who runs this", flag, path, st.Uid, os.Getuid())
	}
	if perm := st.Mode & 0o777; perm&0o077 != 0 {
		return fmt.Errorf("%s %s: mode %04o lets group or others at it; make it 0600 (chmod 600 %s)", flag, path, perm, path)
	}
	return nil
}

// Origins are the values of the Origin header a browser sends for a page
// of this server itself at ln's address: scheme://IP:port, plus
// localhost on a loopback address and the host name the user gave
// (--http NAME:PORT). A page of any other origin (a DNS rebinding
// attacker's, which names its own host) is refused.
func Origins(addr *net.TCPAddr, host string, tls bool) []string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	port := strconv.Itoa(addr.Port)
	hosts := []string{addr.IP.String()}
	if addr.IP.IsLoopback() {
		hosts = append(hosts, "localhost")
	}
	if host != "" && net.ParseIP(host) == nil {
		hosts = append(hosts, strings.ToLower(host))
	}
	var out []string
	for _, h := range hosts {
		out = append(out, scheme+"://"+net.JoinHostPort(h, port))
	}
	return out
}

// normalOrigin is an Origin header's scheme://host:port, lower case and
// with the scheme's default port written out; "" if it is not one.
func normalOrigin(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch {
	case port != "":
	case scheme == "http":
		port = "80"
	case scheme == "https":
		port = "443"
	default:
		return ""
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// guard is what a TCP listener puts in front of MCP: the MCP transport's
// Origin check against DNS rebinding (a browser's request from a page of
// another origin gets 403; clients that are not browsers send no Origin),
// then the bearer token (401 without it or with another). Either check is
// skipped when its option is unset (a Unix socket, which no browser
// reaches and whose mode is its access control).
func guard(h http.Handler, o HTTPOptions) http.Handler {
	allowed := map[string]bool{}
	for _, v := range o.Origins {
		if n := normalOrigin(v); n != "" {
			allowed[n] = true
		}
	}
	want := sha256.Sum256([]byte(o.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, ok := r.Header["Origin"]; ok && o.CheckOrigin {
			if len(v) != 1 || !allowed[normalOrigin(v[0])] {
				http.Error(w, "Forbidden: Origin "+strconv.Quote(strings.Join(v, ", "))+" is not this server's", http.StatusForbidden)
				return
			}
		}
		if o.Token != "" {
			if err := bearer(r, want); err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="boxd-mcp"`+err.Error())
				http.Error(w, "Unauthorized: this server needs Authorization: Bearer <token>", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

var errNoToken = errors.New("")

// bearer checks r's bearer token against want, the SHA-256 of the token:
// comparing digests in constant time tells nothing of the token's length
// or of how many leading bytes a guess got right. Its error is the
// WWW-Authenticate parameters to add.
func bearer(r *http.Request, want [sha256.Size]byte) error {
	v := r.Header.Values("Authorization")
	if len(v) == 0 {
		return errNoToken
	}
	scheme, tok, ok := strings.Cut(v[0], " ")
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if len(v) != 1 || !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return errors.New(`, error="invalid_token"`)
	}
	return nil
}
