//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/network"
)

// TestPoolBookkeeping: each ready member is handed out once, even to
// concurrent takers; refills are asked for up to the target, counting the
// ones starting; a failed start waits before the next; a lowered target
// gives back the surplus.
func TestPoolBookkeeping(t *testing.T) {
	p := &pool{wake: make(chan struct{}, 1)}
	a, b := keyOf("a", ""), keyOf("b", RuntimeRunc)
	p.setWant(a, 3)
	p.setWant(b, 1)
	var started []string
	for {
		k, ok := p.next(time.Now())
		if !ok {
			break
		}
		started = append(started, k.image)
	}
	if fmt.Sprint(started) != "[a a b a]" && fmt.Sprint(started) != "[a b a a]" && fmt.Sprint(started) != "[a a a b]" {
		t.Errorf("starts asked for: %v, want three of a and one of b", started)
	}
	for i, img := range started {
		p.put(keyOf(img, ""), fmt.Sprintf("%s%d", img, i), &memberInfo{pid: uint32(100 + i), hostID: uint32(1000 * i)})
		p.started(keyOf(img, ""), nil)
	}
	if _, ok := p.next(time.Now()); ok {
		t.Error("a full pool asked for another member")
	}
	pidOf := map[string]uint32{}
	for i, img := range started {
		pidOf[fmt.Sprintf("%s%d", img, i)] = uint32(100 + i)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if id, info, ok := p.take(a); ok {
				mu.Lock()
				seen[id]++
				if info == nil || info.pid != pidOf[id] {
					t.Errorf("member %s handed out with %+v, want pid %d", id, info, pidOf[id])
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 3 {
		t.Errorf("10 takers got %v, want the 3 members of a", seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("member %s handed out %d times", id, n)
		}
	}
	// A failed start backs off.
	k, ok := p.next(time.Now())
	if !ok || k != a {
		t.Fatalf("refill: %v %v", k, ok)
	}
	p.started(k, errors.New("boom"))
	if k, ok := p.next(time.Now()); ok {
		t.Errorf("asked to start %v right after a failure", k)
	}
	if _, ok := p.next(time.Now().Add(6 * time.Second)); !ok {
		t.Error("no retry after the backoff")
	}
	// Lowering b's target to 0 gives its member back for destruction.
	p.setWant(b, 0)
	if s := p.surplus(); len(s) != 1 || s[0][0] != 'b' {
		t.Errorf("surplus after emptying b: %v", s)
	}
	if id, ok := p.takeAny(); ok {
		t.Errorf("takeAny got %s from pools with no ready member", id)
	}
	if len(p.known) != 0 {
		t.Errorf("what is known of members no longer in the pool kept: %v", p.known)
	}
	st := p.status()
	if len(st) != 1 || st[0].Image != "a" || st[0].Runtime != RuntimeRunc || st[0].Size != 3 || st[0].Starting != 1 {
		t.Errorf("status = %+v", st)
	}
}

// TestPoolKeysByRuntime: an image's pools on runc and on gVisor are
// separate: a member of one is never handed out for the other, each is
// refilled and listed on its own, and removing the image takes both.
func TestPoolKeysByRuntime(t *testing.T) {
	p := &pool{wake: make(chan struct{}, 1)}
	runc, gv := keyOf("img", ""), keyOf("img", RuntimeGvisor)
	p.setWant(runc, 1)
	p.setWant(gv, 1)
	var asked []poolKey
	for {
		k, ok := p.next(time.Now())
		if !ok {
			break
		}
		asked = append(asked, k)
	}
	if len(asked) != 2 || asked[0] == asked[1] {
		t.Fatalf("starts asked for: %v, want one of each runtime", asked)
	}
	p.put(runc, "r1", nil)
	p.started(runc, nil)
	if id, _, ok := p.take(gv); ok {
		t.Errorf("the gVisor pool handed out %s, a runc member", id)
	}
	p.put(gv, "g1", nil)
	p.started(gv, nil)
	if id, _, ok := p.take(gv); !ok || id != "g1" {
		t.Errorf("gVisor take: %q %v, want g1", id, ok)
	}
	p.put(gv, "g2", nil)
	st := p.status()
	if len(st) != 2 || st[0].Runtime != RuntimeGvisor || st[1].Runtime != RuntimeRunc || st[0].Ready != 1 || st[1].Ready != 1 {
		t.Errorf("status = %+v, want the gvisor and runc pools of img, one ready each", st)
	}
	if ids := p.takeAll("img"); len(ids) != 2 {
		t.Errorf("takeAll(img) = %v, want r1 and g2", ids)
	}
}

// TestPoolRefillHoldOff: refills wait while creates are served and for
// refillQuiet after the last one, but never more than refillMaxHold in a
// row, so a steady stream of creates still gets its pool back.
func TestPoolRefillHoldOff(t *testing.T) {
	p := &pool{wake: make(chan struct{}, 1)}
	t0 := time.Now()
	if d := p.holdOff(t0); d != 0 {
		t.Fatalf("idle pool holds refills off for %v", d)
	}
	p.serveBegin()
	if d := p.holdOff(t0); d != refillQuiet {
		t.Errorf("during a create: hold %v, want %v", d, refillQuiet)
	}
	p.serveEnd()
	end := p.lastServe
	if d := p.holdOff(end.Add(100 * time.Millisecond)); d != refillQuiet-100*time.Millisecond {
		t.Errorf("100 ms after the last create: hold %v, want %v", d, refillQuiet-100*time.Millisecond)
	}
	if d := p.holdOff(end.Add(refillQuiet)); d != 0 {
		t.Errorf("a quiet period after the last create: hold %v, want 0", d)
	}
	// A create in flight the whole time: the hold ends at refillMaxHold.
	p.serveBegin()
	start := time.Now()
	if d := p.holdOff(start); d != refillQuiet {
		t.Errorf("steady stream, first look: hold %v", d)
	}
	if d := p.holdOff(start.Add(refillMaxHold - 100*time.Millisecond)); d != 100*time.Millisecond {
		t.Errorf("steady stream, 100 ms before the cap: hold %v, want 100ms", d)
	}
	if d := p.holdOff(start.Add(refillMaxHold)); d != 0 {
		t.Errorf("steady stream at the cap: hold %v, want 0 (refill now)", d)
	}
	// The next hold begins anew after that round.
	if d := p.holdOff(start.Add(refillMaxHold + time.Millisecond)); d != refillQuiet {
		t.Errorf("steady stream after the cap: hold %v, want a new hold of %v", d, refillQuiet)
	}
	p.serveEnd()
}

// TestPoolKeysByNetwork: an egress pool is its own pool: a none create
// never takes its members, nor an egress create an ordinary member.
func TestPoolKeysByNetwork(t *testing.T) {
	p := &pool{wake: make(chan struct{}, 1)}
	plain, egress := keyOf("img", ""), keyOf("img", "").withNetwork(network.ModeEgress)
	if plain != keyOf("img", "").withNetwork(network.ModeNone) || plain == egress {
		t.Fatalf("keys: none %v, egress %v", plain, egress)
	}
	p.put(egress, "e1", nil)
	if id, _, ok := p.take(plain); ok {
		t.Errorf("the ordinary pool handed out %s, an egress member", id)
	}
	if p.readyOf(egress) != 1 || p.readyOf(plain) != 0 {
		t.Errorf("ready: egress %d, none %d", p.readyOf(egress), p.readyOf(plain))
	}
	if id, _, ok := p.take(egress); !ok || id != "e1" {
		t.Errorf("egress take: %q %v, want e1", id, ok)
	}
}

// TestPoolFits: hostnames and egress go to a runc member; under gVisor
// they make the create cold. A default user goes to any member; a disk cap
// other than the default makes the create cold.
func TestPoolFits(t *testing.T) {
	m := &Manager{}
	for _, c := range []struct {
		r    resolved
		want bool
	}{
		{resolved{runtime: RuntimeRunc, network: network.ModeNone, tun: Tunables{Hostname: "h"}}, true},
		{resolved{runtime: RuntimeRunc, network: network.ModeEgress}, true},
		{resolved{runtime: RuntimeGvisor, network: network.ModeNone, tun: Tunables{Hostname: "h"}}, false},
		{resolved{runtime: RuntimeGvisor, network: network.ModeEgress}, false},
		{resolved{runtime: RuntimeRunc, network: network.ModeNone, user: "1000", userSet: true}, true},
		{resolved{runtime: RuntimeGvisor, network: network.ModeNone, user: "1000", userSet: true}, true},
		{resolved{runtime: RuntimeRunc, network: network.ModeNone, limits: Limits{DiskBytes: 64 << 20}}, false},
		{resolved{runtime: RuntimeRunc, network: network.ModeEgress, cold: true}, false},
	} {
		if got := m.fits(c.r); got != c.want {
			t.Errorf("fits(%+v) = %v, want %v", c.r, got, c.want)
		}
	}
}

// TestPoolCounts: each pool counts its creates by outcome; a create for
// a key that is no pool counts nowhere.
func TestPoolCounts(t *testing.T) {
	p := &pool{wake: make(chan struct{}, 1)}
	plain := keyOf("img", "")
	egress := plain.withNetwork(network.ModeEgress)
	p.setWant(plain, 1)
	p.count(plain, outcomeHanded)
	p.count(plain, outcomeHanded)
	p.count(plain, outcomeEmpty)
	p.count(plain, outcomeUnfit)
	p.count(egress, outcomeHanded) // no egress pool
	st := p.status()
	if len(st) != 1 || st[0].HandedOut != 2 || st[0].ColdEmpty != 1 || st[0].ColdUnfit != 1 || st[0].Network != "" {
		t.Errorf("status %+v, want one pool with 2 handed out, 1 cold empty, 1 cold unfit", st)
	}
}
