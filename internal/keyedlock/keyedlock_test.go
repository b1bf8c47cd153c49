package keyedlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTryLock(t *testing.T) {
	var s Set
	if !s.TryLock("a") {
		t.Fatal("first TryLock of a free key failed")
	}
	if s.TryLock("a") {
		t.Fatal("second TryLock of a held key succeeded")
	}
	if !s.TryLock("b") {
		t.Fatal("another key is blocked by a")
	}
	if !s.Held("a") || s.Held("c") {
		t.Fatal("Held is wrong")
	}
	s.Unlock("a")
	s.Unlock("a") // a second release is harmless
	if s.Held("a") || !s.TryLock("a") {
		t.Fatal("a is not free after Unlock")
	}
}

// TestMutualExclusion has many goroutines take a few keys in turn: no two
// ever hold one key at once (run with -race, it also checks the Set's own
// locking).
func TestMutualExclusion(t *testing.T) {
	var s Set
	const keys, workers, rounds = 4, 64, 50
	var inside [keys]atomic.Int32
	var total atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				k := (w + r) % keys
				key := fmt.Sprint("k", k)
				if !s.Lock(context.Background(), key, time.Minute) {
					t.Errorf("Lock %s failed", key)
					return
				}
				if n := inside[k].Add(1); n != 1 {
					t.Errorf("%d holders of %s", n, key)
				}
				total.Add(1)
				inside[k].Add(-1)
				s.Unlock(key)
			}
		}()
	}
	wg.Wait()
	if total.Load() != workers*rounds {
		t.Fatalf("%d of %d rounds ran", total.Load(), workers*rounds)
	}
	for k := range keys {
		if s.Held(fmt.Sprint("k", k)) {
			t.Fatalf("k%d still held", k)
		}
	}
}

// wakeDelays measures, over n rounds, how long after Unlock a waiter
// blocked in wait returns.
func wakeDelays(t *testing.T, n int, wait func(s *Set) bool) []time.Duration {
	t.Helper()
	var out []time.Duration
	for range n {
		var s Set
		s.TryLock("k")
		done := make(chan time.Time, 1)
		go func() {
			if !wait(&s) {
				t.Error("wait failed")
			}
			done <- time.Now()
		}()
		time.Sleep(2 * time.Millisecond) // let it block
		released := time.Now()
		s.Unlock("k")
		select {
		case woke := <-done:
			out = append(out, woke.Sub(released))
		case <-time.After(5 * time.Second):
			t.Fatal("waiter did not wake")
		}
	}
	slices.Sort(out)
	return out
}

// TestWakesPromptly checks a waiter is woken by the release, not by a
// poll: a 10 ms poll would put the median delay near 5 ms.
func TestWakesPromptly(t *testing.T) {
	ctx := context.Background()
	for name, wait := range map[string]func(*Set) bool{
		"Lock": func(s *Set) bool { return s.Lock(ctx, "k", time.Minute) },
		"Wait": func(s *Set) bool { s.Wait(ctx, "k", time.Minute); return !s.Held("k") },
	} {
		d := wakeDelays(t, 31, wait)
		if med := d[len(d)/2]; med > 2*time.Millisecond {
			t.Errorf("%s: median wake delay %s, want under 2ms (all: %v)", name, med, d)
		}
	}
}

func TestLockDeadline(t *testing.T) {
	var s Set
	s.TryLock("k")
	t0 := time.Now()
	if s.Lock(context.Background(), "k", 30*time.Millisecond) {
		t.Fatal("Lock of a held key succeeded")
	}
	if el := time.Since(t0); el < 30*time.Millisecond || el > 2*time.Second {
		t.Fatalf("Lock gave up after %s, want about 30ms", el)
	}
	t0 = time.Now()
	s.Wait(context.Background(), "k", 30*time.Millisecond)
	if el := time.Since(t0); el < 30*time.Millisecond || el > 2*time.Second {
		t.Fatalf("Wait gave up after %s, want about 30ms", el)
	}
}

func TestCancel(t *testing.T) {
	var s Set
	s.TryLock("k")
	for name, wait := range map[string]func(context.Context){
		"Lock": func(ctx context.Context) {
			if s.Lock(ctx, "k", time.Hour) {
				t.Error("Lock of a held key succeeded")
			}
		},
		"Wait": func(ctx context.Context) { s.Wait(ctx, "k", time.Hour) },
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { wait(ctx); close(done) }()
		time.Sleep(5 * time.Millisecond)
		t0 := time.Now()
		cancel()
		select {
		case <-done:
			if el := time.Since(t0); el > 100*time.Millisecond {
				t.Errorf("%s returned %s after the cancel", name, el)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s ignored the cancel", name)
		}
	}
	// A free key is taken even under an ended context, as before a wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if !s.Lock(ctx, "free", time.Hour) {
		t.Fatal("Lock of a free key under an ended context failed")
	}
}

// TestWaitDoesNotTake checks Wait leaves the key free and returns at once
// for a free key.
func TestWaitDoesNotTake(t *testing.T) {
	var s Set
	t0 := time.Now()
	s.Wait(context.Background(), "k", time.Hour)
	if time.Since(t0) > 100*time.Millisecond || s.Held("k") {
		t.Fatal("Wait on a free key blocked or took it")
	}
}
