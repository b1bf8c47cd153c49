//go:build linux

package rpc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
)

// Tokens are the bearer tokens of boxd's TCP listeners. A token names a
// host user (its owner, a uid like the socket's peer) and a scope; boxd
// keeps only the SHA-256 of each secret, in one 0600 JSON file under its
// state directory, so a copy of the file lets nobody call boxd. The
// secret is 32 random bytes: a hash without salt or stretching is enough,
// as nobody can guess such a secret from its hash.

// Token scopes, from least to most.
const (
	ScopeRead    = "read"
	ScopeExec    = "exec"
	ScopeWrite   = "write"
	ScopeAdmin   = "admin"
	ScopeMetrics = "metrics"
)

var tokenScopes = []string{ScopeRead, ScopeExec, ScopeWrite, ScopeAdmin, ScopeMetrics}

// tokenPrefix starts every secret, so a leaked one is recognisable (and
// secret scanners can match it).
const tokenPrefix = "boxd_"

// maxTokenLen bounds what boxd reads of an Authorization header's token:
// a longer one is refused before it is hashed.
const maxTokenLen = 128

// defaultTokenTTL is a token's life unless its creator says otherwise.
const defaultTokenTTL = 30 * 24 * time.Hour

var tokenNameRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// TokenRecord is one token as boxd keeps it.
type TokenRecord struct {
	Name     string    `json:"name"`
	UID      uint32    `json:"uid"`
	Scope    string    `json:"scope"`
	Hash     string    `json:"sha256"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	LastUsed time.Time `json:"last_used,omitzero"`
}

// TokenStore holds the tokens in memory and in their file.
type TokenStore struct {
	path string

	mu     sync.Mutex
	byHash map[string]*TokenRecord
}

// OpenTokens reads the token file at path (none yet: no tokens).
func OpenTokens(path string) (*TokenStore, error) {
	ts := &TokenStore{path: path, byHash: map[string]*TokenRecord{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ts, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	var recs []*TokenRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("tokens: %s: %w", path, err)
	}
	for _, r := range recs {
		ts.byHash[r.Hash] = r
	}
	return ts, nil
}

// saveLocked writes every token to the file, through a temporary file
// renamed over it so a crash leaves the old file or the new one.
func (ts *TokenStore) saveLocked() error {
	recs := make([]*TokenRecord, 0, len(ts.byHash))
	for _, r := range ts.byHash {
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b *TokenRecord) int {
		if a.UID != b.UID {
			return int(int64(a.UID) - int64(b.UID))
		}
		return strings.Compare(a.Name, b.Name)
	})
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(ts.path), 0o700); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	tmp := ts.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	if err := os.Rename(tmp, ts.path); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	return nil
}

func hashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// ParseTokenTTL reads a token's life: a Go duration or a number of days
// ("30d").
func ParseTokenTTL(s string) (time.Duration, error) {
	if s == "" {
		return defaultTokenTTL, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("ttl: %q is not a number of days: %w", s, errdefs.ErrInvalidArgument)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("ttl: %q is not a duration (30d, 12h, 90m): %w", s, errdefs.ErrInvalidArgument)
		}
	}
	if d < time.Minute || d > 3650*24*time.Hour {
		return 0, fmt.Errorf("ttl: %q is outside 1m to 3650d: %w", s, errdefs.ErrInvalidArgument)
	}
	return d, nil
}

// Create makes a token and returns its record and secret.
func (ts *TokenStore) Create(name string, uid uint32, scope string, ttl time.Duration) (TokenRecord, string, error) {
	if !tokenNameRe.MatchString(name) {
		return TokenRecord{}, "", fmt.Errorf("name: %q is not 1 to 63 of [A-Za-z0-9_.-] starting with a letter or digit: %w", name, errdefs.ErrInvalidArgument)
	}
	if !slices.Contains(tokenScopes, scope) {
		return TokenRecord{}, "", fmt.Errorf("scope: %q is not one of %s: %w", scope, strings.Join(tokenScopes, ", "), errdefs.ErrInvalidArgument)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return TokenRecord{}, "", fmt.Errorf("tokens: %w", err)
	}
	secret := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := time.Now().UTC().Truncate(time.Second)
	r := &TokenRecord{Name: name, UID: uid, Scope: scope, Hash: hashToken(secret), Created: now, Expires: now.Add(ttl)}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, o := range ts.byHash {
		if o.UID == uid && o.Name == name {
			return TokenRecord{}, "", fmt.Errorf("token %q: the owner has a token of that name: %w", name, errdefs.ErrAlreadyExists)
		}
	}
	ts.byHash[r.Hash] = r
	if err := ts.saveLocked(); err != nil {
		delete(ts.byHash, r.Hash)
		return TokenRecord{}, "", err
	}
	return *r, secret, nil
}

// List returns the tokens of uid, or every token if all.
func (ts *TokenStore) List(uid uint32, all bool) []TokenRecord {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []TokenRecord
	for _, r := range ts.byHash {
		if all || r.UID == uid {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b TokenRecord) int {
		if a.UID != b.UID {
			return int(int64(a.UID) - int64(b.UID))
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Delete revokes uid's token name: from the next call on it is unknown.
func (ts *TokenStore) Delete(name string, uid uint32) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for h, r := range ts.byHash {
		if r.UID == uid && r.Name == name {
			delete(ts.byHash, h)
			if err := ts.saveLocked(); err != nil {
				ts.byHash[h] = r
				return err
			}
			return nil
		}
	}
	return fmt.Errorf("token %q: not found: %w", name, errdefs.ErrNotFound)
}

// errBadToken is every failed authentication's one message, so a caller
// learns nothing of why a token did not pass.
var errBadToken = errors.New("invalid, expired or revoked token")

// Authenticate finds the token whose secret this is. Last use is kept in
// memory and written with the next change of the file.
func (ts *TokenStore) Authenticate(secret string) (TokenRecord, error) {
	if len(secret) > maxTokenLen || !strings.HasPrefix(secret, tokenPrefix) {
		return TokenRecord{}, errBadToken
	}
	h := hashToken(secret)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	r, ok := ts.byHash[h]
	if !ok {
		return TokenRecord{}, errBadToken
	}
	now := time.Now()
	if !now.Before(r.Expires) {
		return TokenRecord{}, errBadToken
	}
	r.LastUsed = now.UTC().Truncate(time.Second)
	return *r, nil
}

// tokenRecheck is how often a stream's token is checked again: a token
// revoked or expired while a stream runs (an attach, a follow of events)
// ends it within this long.
const tokenRecheck = 2 * time.Second

// watch cancels a stream's context once its token (by hash) is revoked or
// expired; it returns when ctx ends.
func (ts *TokenStore) watch(ctx context.Context, cancel func(), hash string) {
	tick := time.NewTicker(tokenRecheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			ts.mu.Lock()
			r, ok := ts.byHash[hash]
			valid := ok && now.Before(r.Expires)
			ts.mu.Unlock()
			if !valid {
				cancel()
				return
			}
		}
	}
}
