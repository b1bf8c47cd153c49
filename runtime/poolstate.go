//go:build linux

// Room: pools. The pools' in-memory bookkeeping: members per image and
// runtime, targets, and the hold-off that lets creates go first.

package runtime

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/boxd-dev/boxd/network"
)

// poolFillers is how many members are started at once: enough to refill
// a large pool quickly, few enough not to starve the creates being served.
const poolFillers = 4

// poolKey names one pool: an image's members on one runtime, with or
// without a network namespace made ready for egress (network: "" or
// network.ModeEgress). A member's image is its pool label's value, its
// runtime its record's and its network its LabelPoolNetwork, so a
// restarted boxd files each member it takes back under the right key.
type poolKey struct {
	image, runtime string
	network        string
}

// withNetwork is k's pool of members ready for mode ("" for none).
func (k poolKey) withNetwork(mode string) poolKey {
	if mode == network.ModeNone {
		mode = ""
	}
	k.network = mode
	return k
}

// keyOf is the pool key of image on runtime ("" is runc).
func keyOf(image, runtime string) poolKey {
	if runtime == "" {
		runtime = RuntimeRunc
	}
	return poolKey{image: image, runtime: runtime}
}

type imagePool struct {
	want     int
	ready    []string
	starting int
	retryAt  time.Time // after a failed start
	backoff  time.Duration
	// Creates for this pool since boxd started: served by a member,
	// made cold with no member ready, made cold for asking what a
	// member cannot take on (fits).
	handedOut, coldEmpty, coldUnfit uint64
}

// Outcomes of a create a pool could have served, counted per pool.
const (
	outcomeHanded = iota
	outcomeEmpty
	outcomeUnfit
)

// count records a create's outcome for pool k, if k is a pool.
func (p *pool) count(k poolKey, outcome int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip := p.by[k]
	if ip == nil {
		return
	}
	switch outcome {
	case outcomeHanded:
		ip.handedOut++
	case outcomeEmpty:
		ip.coldEmpty++
	default:
		ip.coldUnfit++
	}
}

type pool struct {
	mu   sync.Mutex
	by   map[poolKey]*imagePool // by normalized image name and runtime
	wake chan struct{}

	// known holds what this boxd recorded when it started each member,
	// so an adoption needs neither a metadata read nor a task lookup
	// (round trips through containerd, and to the shim, that a burst of
	// creates pays for a hundred times over on a loaded host). A member
	// taken back after a restart has no entry and is read from
	// containerd.
	known map[string]memberInfo

	// Creates being served, and when the last one ended: refills wait
	// for a lull (holdOff).
	serving   int
	lastServe time.Time
	holdSince time.Time // when the current hold-off began; zero if none
}

// serveBegin and serveEnd bracket a create (pooled or cold).
func (p *pool) serveBegin() {
	p.mu.Lock()
	p.serving++
	p.mu.Unlock()
}

func (p *pool) serveEnd() {
	p.mu.Lock()
	p.serving--
	p.lastServe = time.Now()
	p.mu.Unlock()
}

// holdOff is how long refills should still wait at now; 0: start them.
func (p *pool) holdOff(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	wait := time.Duration(0)
	if p.serving > 0 {
		wait = refillQuiet
	} else if d := refillQuiet - now.Sub(p.lastServe); d > 0 {
		wait = d
	}
	if wait == 0 {
		p.holdSince = time.Time{}
		return 0
	}
	if p.holdSince.IsZero() {
		p.holdSince = now
	}
	if left := refillMaxHold - now.Sub(p.holdSince); left < wait {
		if left <= 0 {
			// Held long enough: let this round of refills start, and a
			// new hold-off begin after it.
			p.holdSince = time.Time{}
			return 0
		}
		wait = left
	}
	return wait
}

func (p *pool) get(k poolKey) *imagePool {
	if p.by == nil {
		p.by = map[poolKey]*imagePool{}
	}
	ip := p.by[k]
	if ip == nil {
		ip = &imagePool{}
		p.by[k] = ip
	}
	return ip
}

func (p *pool) setWant(k poolKey, n int) {
	p.mu.Lock()
	ip := p.get(k)
	ip.want, ip.retryAt, ip.backoff = n, time.Time{}, 0
	p.mu.Unlock()
	p.signal()
}

func (p *pool) wanted(k poolKey) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ip := p.by[k]; ip != nil {
		return ip.want
	}
	return 0
}

func (p *pool) isStarting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ip := range p.by {
		if ip.starting > 0 {
			return true
		}
	}
	return false
}

// readyOf is how many members of pool k are ready (a hint: another
// create may take them first).
func (p *pool) readyOf(k poolKey) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ip := p.by[k]; ip != nil {
		return len(ip.ready)
	}
	return 0
}

// take hands out a ready member of pool k and what is known of it (nil:
// read it from containerd); each id is handed out once.
func (p *pool) take(k poolKey) (string, *memberInfo, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip := p.by[k]
	if ip == nil || len(ip.ready) == 0 {
		return "", nil, false
	}
	id := ip.ready[0]
	ip.ready = ip.ready[1:]
	var info *memberInfo
	if mi, ok := p.known[id]; ok {
		info = &mi
		delete(p.known, id)
	}
	return id, info, true
}

// takeAll takes every ready member of image, on any runtime, out of the
// pool.
func (p *pool) takeAll(image string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for k, ip := range p.by {
		if k.image != image {
			continue
		}
		ids = append(ids, ip.ready...)
		ip.ready = nil
	}
	for _, id := range ids {
		delete(p.known, id)
	}
	return ids
}

// takeAny hands out a ready member of any image (to make room under
// max-sandboxes), preferring the image with the most.
func (p *pool) takeAny() (string, bool) {
	p.mu.Lock()
	var best *imagePool
	for _, ip := range p.by {
		if len(ip.ready) > 0 && (best == nil || len(ip.ready) > len(best.ready)) {
			best = ip
		}
	}
	p.mu.Unlock()
	if best == nil {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(best.ready) == 0 {
		return "", false
	}
	id := best.ready[len(best.ready)-1]
	best.ready = best.ready[:len(best.ready)-1]
	delete(p.known, id)
	return id, true
}

// memberInfo is what a member was started with, as its label records it.
type memberInfo struct {
	pid         uint32 // its init's
	hostID      uint32 // first host id of its uid block
	shimGroup   string // the shim it shares ("": its own)
	imageDigest string
	runtime     RuntimeInfo
}

// isReady reports whether id is a ready member of some pool.
func (p *pool) isReady(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ip := range p.by {
		if slices.Contains(ip.ready, id) {
			return true
		}
	}
	return false
}

// put adds a ready member of pool k; info is nil if not known.
func (p *pool) put(k poolKey, id string, info *memberInfo) {
	p.mu.Lock()
	if info != nil {
		if p.known == nil {
			p.known = map[string]memberInfo{}
		}
		p.known[id] = *info
	}
	ip := p.get(k)
	ip.ready = append(ip.ready, id)
	ip.backoff, ip.retryAt = 0, time.Time{}
	p.mu.Unlock()
}

// surplus takes out the ready members above each image's target.
func (p *pool) surplus() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, ip := range p.by {
		for len(ip.ready) > ip.want {
			out = append(out, ip.ready[len(ip.ready)-1])
			delete(p.known, ip.ready[len(ip.ready)-1])
			ip.ready = ip.ready[:len(ip.ready)-1]
		}
	}
	return out
}

// next picks a pool short of members and counts one more starting for
// it; false when none needs one now.
func (p *pool) next(now time.Time) (poolKey, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]poolKey, 0, len(p.by))
	for k := range p.by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
	// The pool with the largest gap first, so one big pool does not keep
	// a small one empty.
	var best poolKey
	gap := 0
	for _, k := range keys {
		ip := p.by[k]
		if g := ip.want - len(ip.ready) - ip.starting; g > gap && !now.Before(ip.retryAt) {
			best, gap = k, g
		}
	}
	if gap == 0 {
		return poolKey{}, false
	}
	p.by[best].starting++
	return best, true
}

func keyLess(a, b poolKey) bool {
	if a.image != b.image {
		return a.image < b.image
	}
	if a.runtime != b.runtime {
		return a.runtime < b.runtime
	}
	return a.network < b.network
}

// started ends a member start of pool k; err says how it went.
func (p *pool) started(k poolKey, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip := p.get(k)
	ip.starting--
	if err != nil {
		// Short: a missing image may be imported, a full max-sandboxes freed,
		// any moment, and a failed attempt costs little.
		ip.backoff = min(max(2*ip.backoff, time.Second), 5*time.Second)
		ip.retryAt = time.Now().Add(ip.backoff)
	}
}

func (p *pool) status() []PoolStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PoolStatus, 0, len(p.by))
	for k, ip := range p.by {
		if ip.want == 0 && len(ip.ready) == 0 && ip.starting == 0 {
			continue
		}
		out = append(out, PoolStatus{Image: k.image, Runtime: k.runtime, Network: k.network, Size: ip.want, Ready: len(ip.ready), Starting: ip.starting,
			HandedOut: ip.handedOut, ColdEmpty: ip.coldEmpty, ColdUnfit: ip.coldUnfit})
	}
	sort.Slice(out, func(i, j int) bool {
		return keyLess(poolKey{out[i].Image, out[i].Runtime, out[i].Network}, poolKey{out[j].Image, out[j].Runtime, out[j].Network})
	})
	return out
}

func (p *pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}
