// Package secrets keeps the credentials boxd brokers at egress: their
// values (on the host only, 0600 under boxd's state dir), the hosts each
// is bound to, and the certificate authority whose leaves boxd's egress
// proxy shows the sandboxes that use them. A sandbox never holds a value:
// it gets a placeholder (Placeholder), which the proxy replaces in
// requests to the secret's hosts (network/broker.go).
package secrets

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds on what a secret holds.
const (
	MaxValueBytes = 16 << 10
	MaxHosts      = 16
	MaxCABytes    = 64 << 10
)

// Errors, wrapped with context; the API maps them to its codes.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	ErrInvalid  = errors.New("invalid")
)

// Secret is one stored credential. Value never leaves boxd but towards
// the secret's hosts.
type Secret struct {
	Name  string   `json:"name"`
	Owner uint32   `json:"owner"`
	Hosts []string `json:"hosts"`
	// Header is the request header the placeholder is replaced in
	// (canonical form); Format, if set, is the whole header value with
	// "{}" standing for the secret (otherwise the placeholder is replaced
	// where it stands).
	Header string `json:"header"`
	Format string `json:"format,omitempty"`
	// AllowHTTP lets the secret go out in plain HTTP too.
	AllowHTTP bool `json:"allow_http,omitempty"`
	// UpstreamCA is PEM the proxy trusts, besides the host's store, when
	// it verifies the bound hosts.
	UpstreamCA string    `json:"upstream_ca,omitempty"`
	Value      string    `json:"value"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Info is what may be shown of a secret: everything but the value.
type Info struct {
	Name      string
	Owner     uint32
	Hosts     []string
	Header    string
	Format    string
	AllowHTTP bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Info is s without its value.
func (s *Secret) Info() Info {
	return Info{Name: s.Name, Owner: s.Owner, Hosts: slices.Clone(s.Hosts), Header: s.Header, Format: s.Format,
		AllowHTTP: s.AllowHTTP, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

var (
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	headerRe = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+.^_|~-]{1,64}$`)
	hostRe   = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid)
}

// ValidName checks a secret's name.
func ValidName(field, name string) error {
	if !nameRe.MatchString(name) || strings.Contains(name, "..") {
		return invalid(field, "%q must be 1-63 characters of letters, digits, _ . - and start with a letter or digit", name)
	}
	return nil
}

// ValidValue checks a secret's value: it goes into a header, so no line
// breaks or control characters (a header injection upstream otherwise).
func ValidValue(v string) error {
	if v == "" || len(v) > MaxValueBytes {
		return invalid("value", "%d bytes; must be 1 to %d", len(v), MaxValueBytes)
	}
	for _, c := range []byte(v) {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return invalid("value", "holds a control character (byte %#x); a header value cannot", c)
		}
	}
	return nil
}

// Validate checks s (but its owner and times) and normalises its hosts
// and header.
func (s *Secret) Validate() error {
	if err := ValidName("name", s.Name); err != nil {
		return err
	}
	if len(s.Hosts) == 0 || len(s.Hosts) > MaxHosts {
		return invalid("hosts", "%d hosts; a secret is bound to 1 to %d", len(s.Hosts), MaxHosts)
	}
	for i, h := range s.Hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if len(h) > 253 || !hostRe.MatchString(h) || !strings.Contains(h, ".") || net.ParseIP(h) != nil {
			return invalid(fmt.Sprintf("hosts[%d]", i), "%q is not a DNS name with a dot (no wildcards, addresses or ports)", s.Hosts[i])
		}
		s.Hosts[i] = h
	}
	if s.Header == "" {
		s.Header = "Authorization"
	}
	if !headerRe.MatchString(s.Header) {
		return invalid("header", "%q is not a header name", s.Header)
	}
	if s.Format != "" && (strings.Count(s.Format, "{}") != 1 || ValidValue(s.Format) != nil) {
		return invalid("format", "%q must hold {} once and no control characters", s.Format)
	}
	if len(s.UpstreamCA) > MaxCABytes {
		return invalid("upstream_ca", "%d bytes, at most %d", len(s.UpstreamCA), MaxCABytes)
	}
	if s.UpstreamCA != "" {
		if _, err := ParseCAs(s.UpstreamCA); err != nil {
			return invalid("upstream_ca", "%v", err)
		}
	}
	return ValidValue(s.Value)
}

// ParseCAs reads PEM certificates (at least one).
func ParseCAs(p string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(p)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// Placeholder is a new random token for a sandbox to hold in place of a
// secret: unique to the sandbox, worthless anywhere else.
func Placeholder() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "boxd-secret-" + hex.EncodeToString(b)
}

// Store keeps secrets as one file each, dir/UID/NAME.json, 0600 in 0700
// directories. Its methods are safe for concurrent use.
type Store struct {
	dir string
	mu  sync.Mutex
}

// Open makes dir if it is missing.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return &Store{dir: dir}, nil
}

func (st *Store) path(owner uint32, name string) string {
	return filepath.Join(st.dir, strconv.FormatUint(uint64(owner), 10), name+".json")
}

// Create stores a new secret; ErrExists if its owner has one by that name.
func (st *Store) Create(s *Secret) error {
	if err := s.Validate(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := os.Stat(st.path(s.Owner, s.Name)); err == nil {
		return fmt.Errorf("secret %q: %w", s.Name, ErrExists)
	}
	s.CreatedAt = time.Now().UTC()
	s.UpdatedAt = s.CreatedAt
	return st.write(s)
}

// Rotate replaces the value of owner's secret name.
func (st *Store) Rotate(owner uint32, name, value string) (Info, error) {
	if err := ValidValue(value); err != nil {
		return Info{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	s, err := st.get(owner, name)
	if err != nil {
		return Info{}, err
	}
	s.Value, s.UpdatedAt = value, time.Now().UTC()
	return s.Info(), st.write(s)
}

// write puts s in place atomically, readable by boxd's user alone.
func (st *Store) write(s *Secret) error {
	p := st.path(s.Owner, s.Name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".new-*")
	if err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		return fmt.Errorf("secrets: store %q: %w", s.Name, err)
	}
	return nil
}

// Get is owner's secret name, value included (for the proxy).
func (st *Store) Get(owner uint32, name string) (*Secret, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.get(owner, name)
}

func (st *Store) get(owner uint32, name string) (*Secret, error) {
	if ValidName("name", name) != nil {
		return nil, fmt.Errorf("secret %q: %w", name, ErrNotFound)
	}
	b, err := os.ReadFile(st.path(owner, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("secret %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	var s Secret
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("secrets: %s: %w", name, err)
	}
	return &s, nil
}

// Remove deletes owner's secret name.
func (st *Store) Remove(owner uint32, name string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := st.get(owner, name); err != nil {
		return err
	}
	if err := os.Remove(st.path(owner, name)); err != nil {
		return fmt.Errorf("secrets: %w", err)
	}
	return nil
}

// List is the secrets of owner, or of everyone if all, by owner and name.
func (st *Store) List(owner uint32, all bool) ([]Info, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	dirs := []string{strconv.FormatUint(uint64(owner), 10)}
	if all {
		ents, err := os.ReadDir(st.dir)
		if err != nil {
			return nil, fmt.Errorf("secrets: %w", err)
		}
		dirs = dirs[:0]
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, e.Name())
			}
		}
	}
	var out []Info
	for _, d := range dirs {
		uid, err := strconv.ParseUint(d, 10, 32)
		if err != nil {
			continue
		}
		ents, _ := os.ReadDir(filepath.Join(st.dir, d))
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), ".json")
			if !ok || strings.HasPrefix(name, ".") {
				continue
			}
			if s, err := st.get(uint32(uid), name); err == nil {
				out = append(out, s.Info())
			}
		}
	}
	return out, nil
}
