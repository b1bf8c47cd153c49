//go:build linux

package gateway

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/boxd-dev/boxd/rpc"
)

// Tokens is the gateway's one token store: boxd's token file format, made
// with `boxd-gateway token create` and read again when the file changes
// (at most once a second), so a token created or removed takes effect
// without a restart.
type Tokens struct {
	path string

	mu      sync.Mutex
	store   *rpc.TokenStore
	mtime   time.Time
	checked time.Time
}

// OpenTokens opens the token file at path.
func OpenTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.reload(time.Now()); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Tokens) reload(now time.Time) error {
	st, err := os.Stat(t.path)
	var mtime time.Time
	if err == nil {
		mtime = st.ModTime()
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	t.checked = now
	if t.store != nil && mtime.Equal(t.mtime) {
		return nil
	}
	s, err := rpc.OpenTokens(t.path)
	if err != nil {
		return err
	}
	t.store, t.mtime = s, mtime
	return nil
}

// Authenticate finds the token whose secret this is.
func (t *Tokens) Authenticate(secret string) (rpc.TokenRecord, error) {
	t.mu.Lock()
	now := time.Now()
	if now.Sub(t.checked) >= time.Second {
		_ = t.reload(now) // a broken file keeps the tokens read before
	}
	s := t.store
	t.mu.Unlock()
	return s.Authenticate(secret)
}
