// Package keyedlock is a set of named locks: at most one holder per key,
// and a waiter is woken by the release itself (a channel closed on
// Unlock), not by polling. boxd's runtime holds a sandbox's id while it
// creates, restarts, changes or deletes it, so the others wait or give
// way; each wait is bounded by a context and a duration.
package keyedlock

import (
	"context"
	"sync"
	"time"
)

// Set is a set of keyed locks. The zero value is ready to use; a Set must
// not be copied after first use.
type Set struct {
	mu sync.Mutex
	// held maps each held key to a channel closed when it is released.
	held map[string]chan struct{}
}

// TryLock takes key if no one holds it and reports whether it did.
func (s *Set) TryLock(key string) bool {
	_, ok := s.tryLock(key)
	return ok
}

// tryLock takes key, or returns the channel its release closes.
func (s *Set) tryLock(key string) (<-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.held[key]; ok {
		return ch, false
	}
	if s.held == nil {
		s.held = map[string]chan struct{}{}
	}
	s.held[key] = make(chan struct{})
	return nil, true
}

// Lock takes key, waiting up to d for its holder to release it. It reports
// false if d passed or ctx ended first; it tries once even then.
func (s *Set) Lock(ctx context.Context, key string, d time.Duration) bool {
	var timeout <-chan time.Time
	for {
		released, ok := s.tryLock(key)
		if ok {
			return true
		}
		if timeout == nil {
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-released:
		case <-timeout:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Wait returns once no one holds key, d has passed, or ctx has ended,
// without taking key.
func (s *Set) Wait(ctx context.Context, key string, d time.Duration) {
	released := s.releasedCh(key)
	if released == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for released != nil {
		select {
		case <-released:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
		// Another caller may have taken key between the release and now.
		released = s.releasedCh(key)
	}
}

// releasedCh is the channel key's release closes; nil if key is free.
func (s *Set) releasedCh(key string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.held[key]; ok {
		return ch
	}
	return nil
}

// Held reports whether someone holds key.
func (s *Set) Held(key string) bool {
	return s.releasedCh(key) != nil
}

// Unlock releases key and wakes its waiters. Releasing a key no one holds
// does nothing.
func (s *Set) Unlock(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.held[key]; ok {
		delete(s.held, key)
		close(ch)
	}
}
