// Package events is boxd's record of what happened to sandboxes: a bounded
// in-memory ring of the recent events, mirrored to an append-only JSON-lines
// file in the state directory so a consumer that reconnects (with a since
// time) misses nothing, even across a boxd restart or SIGKILL. Writes are
// not fsynced (internal/rotfile): a killed boxd loses nothing the kernel
// already has, only a host crash can lose the last few lines.
package events

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/boxd-dev/boxd/internal/jsonline"
	"github.com/boxd-dev/boxd/internal/rotfile"
)

// Event types boxd emits.
const (
	Created     = "created"      // a sandbox was made (its init answers)
	Started     = "started"      // a sandbox's init started (at create, or a restart)
	ExecStarted = "exec_started" // a command began (attrs: args)
	ExecExited  = "exec_exited"  // a command ended (attrs: exit_code, signal)
	OOM         = "oom"          // the kernel OOM-killed a process in the sandbox
	Died        = "died"         // the sandbox's init exited (attrs: exit_status)
	Paused      = "paused"       // frozen (attrs: reason user|idle)
	Resumed     = "resumed"      // thawed (attrs: reason user|exec)
	Expired     = "expired"      // the TTL ran out (deleted next)
	Idle        = "idle"         // the idle timeout fired (attrs: action pause|delete)
	Restarted   = "restarted"    // a dead init was replaced (attrs: reason)
	Deleted     = "deleted"      // the sandbox and its data are gone
	// PortUnpublished: boxd could not listen on a published port again
	// after a restart and gave it up (attrs: host_addr, port, reason, error).
	PortUnpublished = "port_unpublished"
	// EgressDenied: an egress sandbox's refused connections or DNS names,
	// aggregated over the deny log's window (attrs: dest, port, proto,
	// reason, count, first, last).
	EgressDenied = "egress_denied"
	// Checkpointed: a gVisor sandbox was written to disk and its memory
	// freed (attrs: reason user|idle, bytes); Restored: it runs again
	// from its checkpoint (attrs: reason user|exec|auto).
	Checkpointed = "checkpointed"
	Restored     = "restored"
)

// Types lists every event type, for filter validation.
var Types = []string{Created, Started, ExecStarted, ExecExited, OOM, Died, Paused, Resumed, Expired, Idle, Restarted, Deleted, PortUnpublished, EgressDenied, Checkpointed, Restored}

// Event is one thing that happened to one sandbox.
type Event struct {
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Sandbox string    `json:"sandbox"`
	// Owner is the host uid of the sandbox's owner: only that user and
	// admins see the event. An event recorded without one (0) is root's,
	// so admins alone see it.
	Owner uint32            `json:"owner"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

// Config bounds a Log.
type Config struct {
	// Dir holds events.jsonl and its one rotated predecessor events.jsonl.1.
	Dir string
	// Keep is how long events are replayable; at least an hour.
	Keep time.Duration
	// MaxEvents caps the ring (and so memory): the oldest go first.
	MaxEvents int
	// MaxFileBytes rotates the file once it grows past this.
	MaxFileBytes int64
	Logger       *slog.Logger
}

// Defaults: an hour (the promise) plus slack; 50k events of ~150 bytes is
// ~8 MB of memory at most; two files of 16 MiB hold more than the ring.
const (
	DefaultKeep         = 70 * time.Minute
	DefaultMaxEvents    = 50000
	DefaultMaxFileBytes = 16 << 20
)

// Log is the ring plus its file. It is safe for concurrent use.
type Log struct {
	cfg Config

	mu      sync.Mutex
	ring    []Event // oldest first; at most cfg.MaxEvents
	seq     uint64
	f       *rotfile.File
	subs    map[*Sub]struct{}
	lastErr string
}

// Open loads the events kept in dir and opens the file for appending.
func Open(cfg Config) (*Log, error) {
	if cfg.Keep < time.Hour {
		cfg.Keep = DefaultKeep
	}
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := secureDir(cfg.Dir); err != nil {
		return nil, err
	}
	l := &Log{cfg: cfg, subs: map[*Sub]struct{}{}}
	cutoff := time.Now().Add(-cfg.Keep)
	for _, name := range []string{l.path() + ".1", l.path()} {
		if err := l.load(name, cutoff); err != nil {
			return nil, err
		}
	}
	f, err := rotfile.Open(l.path(), cfg.MaxFileBytes, 1)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	l.f = f
	return l, nil
}

func (l *Log) path() string { return filepath.Join(l.cfg.Dir, "events.jsonl") }

// secureDir makes dir root's alone: 0700, and its files 0600. Events name
// every user's sandboxes (and, with argv recording, their commands), and
// a directory or file left readable by an older boxd or by hand is fixed
// here at every start.
func secureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := os.Chmod(filepath.Join(dir, e.Name()), 0o600); err != nil {
			return fmt.Errorf("events: %w", err)
		}
	}
	return nil
}

// load reads one file into the ring; a torn or corrupt line (a write cut
// by SIGKILL) is skipped.
func (l *Log) load(name string, cutoff time.Time) error {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Type == "" {
			continue
		}
		l.seq = max(l.seq, ev.Seq)
		if ev.Time.Before(cutoff) {
			continue
		}
		l.push(ev)
	}
	return nil
}

func (l *Log) push(ev Event) {
	if len(l.ring) >= l.cfg.MaxEvents {
		n := copy(l.ring, l.ring[len(l.ring)/10+1:])
		l.ring = l.ring[:n]
	}
	l.ring = append(l.ring, ev)
}

// Emit records an event for sandbox, owned by the host uid owner, and hands
// it to every subscriber that may see it. It never fails the caller: a
// write error is logged once per distinct error.
func (l *Log) Emit(typ, sandbox string, owner uint32, attrs map[string]string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	ev := Event{Seq: l.seq, Time: time.Now().UTC(), Type: typ, Sandbox: sandbox, Owner: owner, Attrs: attrs}
	// Trim what is older than Keep as we go, so an idle boxd does not keep
	// stale events forever.
	// The ring moves down only once a sixteenth of it (or 1024 events) is
	// stale: dropping one event per Emit moved the whole ring, megabytes,
	// on every event of a daemon busy for longer than Keep. Subscribe
	// skips the stale ones meanwhile.
	cutoff := ev.Time.Add(-l.cfg.Keep)
	drop := 0
	for drop < len(l.ring) && l.ring[drop].Time.Before(cutoff) {
		drop++
	}
	if drop > 0 && (drop >= 1024 || drop*16 >= len(l.ring)) {
		l.ring = append(l.ring[:0], l.ring[drop:]...)
	}
	l.push(ev)
	l.write(ev)
	for s := range l.subs {
		if s.match(ev) {
			s.deliver(ev)
		}
	}
}

// write appends ev to the file, which rotates to events.jsonl.1 (replacing
// the previous one) at MaxFileBytes. The ring is in memory; the files only
// back it.
func (l *Log) write(ev Event) {
	b := append(ev.appendJSON(make([]byte, 0, 256)), '\n')
	if err := l.f.Write(b); err != nil {
		l.logErr(fmt.Errorf("events: %w", err))
	}
}

func (l *Log) logErr(err error) {
	if err.Error() != l.lastErr {
		l.lastErr = err.Error()
		l.cfg.Logger.Error("events: write", "err", err)
	}
}

// appendJSON appends the event as json.Marshal encodes it (jsonline: this
// runs twice per exec).
func (ev *Event) appendJSON(b []byte) []byte {
	start := len(b)
	b = append(b, '{')
	b = jsonline.Key(b, "seq")
	b = jsonline.Uint(b, ev.Seq)
	b = jsonline.Key(b, "time")
	b, ok := jsonline.Time(b, ev.Time)
	if !ok {
		j, _ := json.Marshal(ev)
		return append(b[:start], j...)
	}
	b = jsonline.Key(b, "type")
	b = jsonline.String(b, ev.Type)
	b = jsonline.Key(b, "sandbox")
	b = jsonline.String(b, ev.Sandbox)
	b = jsonline.Key(b, "owner")
	b = jsonline.Uint(b, uint64(ev.Owner))
	if len(ev.Attrs) > 0 {
		b = jsonline.Key(b, "attrs")
		b = jsonline.StringMap(b, ev.Attrs)
	}
	return append(b, '}')
}

// Close closes the file and ends every subscription.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := range l.subs {
		s.end(errors.New("events: log closed"))
	}
	return l.f.Close()
}

// Filter selects events; empty fields match anything.
type Filter struct {
	Sandboxes map[string]bool
	Types     map[string]bool
	// Owner, if set, restricts the events to that uid's sandboxes: the
	// API sets it for every caller that is not an admin.
	Owner *uint32
}

func (f Filter) match(ev Event) bool {
	return (f.Owner == nil || *f.Owner == ev.Owner) &&
		(len(f.Sandboxes) == 0 || f.Sandboxes[ev.Sandbox]) && (len(f.Types) == 0 || f.Types[ev.Type])
}

// ErrSlow ends a subscription whose consumer fell more than its buffer
// behind; it reconnects with since = the last event it got.
var ErrSlow = errors.New("events: the consumer fell too far behind; reconnect with since set to the last event's time")

// Sub is one consumer's live view.
type Sub struct {
	l      *Log
	filter Filter
	ch     chan Event
	done   chan struct{}
	err    error
	once   sync.Once
}

func (s *Sub) match(ev Event) bool { return s.filter.match(ev) }

// deliver runs under l.mu; a full buffer ends the subscription rather
// than blocking every emitter.
func (s *Sub) deliver(ev Event) {
	select {
	case s.ch <- ev:
	default:
		s.end(ErrSlow)
	}
}

func (s *Sub) end(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
		delete(s.l.subs, s)
	})
}

// C delivers events after the replay.
func (s *Sub) C() <-chan Event { return s.ch }

// Done is closed when the subscription ended on its own (Err says why).
func (s *Sub) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended.
func (s *Sub) Err() error { return s.err }

// Close ends the subscription.
func (s *Sub) Close() {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.end(nil)
}

// subBuffer is how many events a consumer may lag behind.
const subBuffer = 4096

// Subscribe returns the kept events at or after since that match f
// (replay, oldest first) and, if follow, a subscription to the ones after
// them; nothing falls between the two.
func (l *Log) Subscribe(since time.Time, f Filter, follow bool) ([]Event, *Sub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var replay []Event
	if !since.IsZero() {
		if cutoff := time.Now().Add(-l.cfg.Keep); since.Before(cutoff) {
			since = cutoff // what Emit has not trimmed yet
		}
		for _, ev := range l.ring {
			if !ev.Time.Before(since) && f.match(ev) {
				replay = append(replay, ev)
			}
		}
	}
	if !follow {
		return replay, nil
	}
	s := &Sub{l: l, filter: f, ch: make(chan Event, subBuffer), done: make(chan struct{})}
	l.subs[s] = struct{}{}
	return replay, s
}
