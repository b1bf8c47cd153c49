package network

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the deny log. A sandbox can make refusals as fast as it can
// send packets, so what boxd keeps of them is bounded per sandbox, and so
// is what it emits as events.
const (
	// DenyWindow is how long refusals of one sandbox, destination, port
	// and reason are aggregated into one record (with a count).
	DenyWindow = 10 * time.Second
	// DenyKeysPerWindow is how many distinct records one sandbox gets per
	// window; refusals past it are counted in one "unrecorded" record.
	DenyKeysPerWindow = 64
	// DenyRecordsPerSandbox is how many records boxd keeps per sandbox
	// (the oldest go first).
	DenyRecordsPerSandbox = 256
	// DenyLogRate and DenyLogBurst bound, per sandbox and reason, how
	// many refused packets per second the kernel reports to boxd; past
	// it packets are still refused but not counted.
	DenyLogRate  = 50
	DenyLogBurst = 100
	// maxDestLen bounds a record's destination (a DNS name, escaped).
	maxDestLen = 300
)

// DenyRecord is one aggregated refusal: Count refusals of Proto to Dest
// (an address, or for DNS the name asked for) on Port, between First and
// Last, for Reason.
type DenyRecord struct {
	First, Last time.Time
	Dest        string
	Port        uint16
	Proto       string
	Reason      string
	Count       uint64
}

type denyKey struct {
	dest, proto, reason string
	port                uint16
}

// sbDenials is one sandbox's part of the deny log.
type sbDenials struct {
	pending    map[denyKey]*DenyRecord // this window's
	unrecorded *DenyRecord             // past DenyKeysPerWindow in this window
	kept       []DenyRecord            // flushed, oldest first
}

// denyLog aggregates refusals per sandbox. Every DenyWindow the pending
// records are kept and handed to onFlush (events).
type denyLog struct {
	mu      sync.Mutex
	bySb    map[string]*sbDenials
	now     func() time.Time
	lost    atomic.Uint64 // kernel messages boxd's socket dropped
	onFlush atomic.Pointer[func(id string, recs []DenyRecord)]
}

func newDenyLog() *denyLog {
	return &denyLog{bySb: map[string]*sbDenials{}, now: time.Now}
}

func (d *denyLog) lostOne() { d.lost.Add(1) }

// add records one refusal for sandbox id.
func (d *denyLog) add(id string, r DenyRecord) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.bySb[id]
	if s == nil {
		s = &sbDenials{pending: map[denyKey]*DenyRecord{}}
		d.bySb[id] = s
	}
	k := denyKey{dest: r.Dest, proto: r.Proto, reason: r.Reason, port: r.Port}
	p := s.pending[k]
	if p == nil {
		if len(s.pending) >= DenyKeysPerWindow {
			if s.unrecorded == nil {
				s.unrecorded = &DenyRecord{First: now, Reason: ReasonUnrecorded}
			}
			p = s.unrecorded
		} else {
			r.First, r.Count = now, 0
			p = &r
			s.pending[k] = p
		}
	}
	p.Last = now
	p.Count++
}

// flush ends the window of every sandbox: its records are kept (the
// oldest past DenyRecordsPerSandbox dropped) and handed to onFlush.
func (d *denyLog) flush() {
	type out struct {
		id   string
		recs []DenyRecord
	}
	var outs []out
	d.mu.Lock()
	for id, s := range d.bySb {
		if recs := s.takePending(); len(recs) > 0 {
			outs = append(outs, out{id, recs})
		}
	}
	d.mu.Unlock()
	if f := d.onFlush.Load(); f != nil {
		for _, o := range outs {
			(*f)(o.id, o.recs)
		}
	}
}

// takePending moves this window's records to kept and returns them.
func (s *sbDenials) takePending() []DenyRecord {
	var recs []DenyRecord
	for _, r := range s.pending {
		recs = append(recs, *r)
	}
	if s.unrecorded != nil {
		recs = append(recs, *s.unrecorded)
	}
	slices.SortFunc(recs, func(a, b DenyRecord) int { return a.First.Compare(b.First) })
	clear(s.pending)
	s.unrecorded = nil
	s.kept = append(s.kept, recs...)
	if n := len(s.kept) - DenyRecordsPerSandbox; n > 0 {
		s.kept = slices.Delete(s.kept, 0, n)
	}
	return recs
}

// records is sandbox id's log: kept records, then the current window's
// (their counts still growing), oldest first.
func (d *denyLog) records(id string) []DenyRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.bySb[id]
	if s == nil {
		return nil
	}
	out := slices.Clone(s.kept)
	var cur []DenyRecord
	for _, r := range s.pending {
		cur = append(cur, *r)
	}
	if s.unrecorded != nil {
		cur = append(cur, *s.unrecorded)
	}
	slices.SortFunc(cur, func(a, b DenyRecord) int { return a.First.Compare(b.First) })
	return append(out, cur...)
}

// forget drops sandbox id's log, handing its current window to onFlush.
func (d *denyLog) forget(id string) {
	d.mu.Lock()
	s := d.bySb[id]
	delete(d.bySb, id)
	var recs []DenyRecord
	if s != nil {
		recs = s.takePending()
	}
	d.mu.Unlock()
	if f := d.onFlush.Load(); f != nil && len(recs) > 0 {
		(*f)(id, recs)
	}
}

// run flushes every DenyWindow for as long as boxd runs.
func (d *denyLog) run() {
	for range time.Tick(DenyWindow) {
		d.flush()
	}
}

// SanitizeName makes a DNS name from a query (presentation form, as
// github.com/miekg/dns gives it; written by the sandbox, so hostile)
// safe to show: lower case letters, digits, '-', '_', '*' and the dots
// between labels stay, every other byte becomes \DDD (its decimal value,
// as in DNS presentation form), and the result is at most maxDestLen
// bytes (cut with "...").
func SanitizeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() <= maxDestLen; i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			// An escape of the presentation form: \DDD or \X.
			if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
				v, _ := strconv.Atoi(s[i+1 : i+4])
				c, i = byte(v), i+3
			} else {
				c, i = s[i+1], i+1
			}
			// An escaped dot is inside a label, not a separator.
			writeNameByte(&b, c, true)
			continue
		}
		writeNameByte(&b, c, false)
	}
	out := b.String()
	if len(out) > maxDestLen {
		out = out[:maxDestLen-3] + "..."
	}
	return out
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func writeNameByte(b *strings.Builder, c byte, escaped bool) {
	switch {
	case c >= 'A' && c <= 'Z':
		b.WriteByte(c + 'a' - 'A')
	case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '*', c == '.' && !escaped:
		b.WriteByte(c)
	default:
		b.WriteString("\\" + strconv.Itoa(int(c)/100) + strconv.Itoa(int(c)/10%10) + strconv.Itoa(int(c)%10))
	}
}
