//go:build linux

package dockerapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/boxd-dev/boxd/internal/events"
	"github.com/boxd-dev/boxd/runtime"
)

// Docker's events come from boxd's event log (internal/events), the one
// boxctl events reads, owner-filtered the same way: a caller who is not
// an admin sees its own sandboxes' events only.

// dockerActions maps boxd's event types to Docker's container actions;
// a type not here has no Docker counterpart and is not shown.
var dockerActions = map[string]string{
	events.Created: "create", events.Started: "start", events.ExecStarted: "exec_start", events.ExecExited: "exec_die",
	events.OOM: "oom", events.Died: "die", events.Paused: "pause", events.Resumed: "unpause", events.Expired: "kill",
	events.Restarted: "restart", events.Deleted: "destroy",
}

// eventFilter is Docker's events filters that boxd serves.
type eventFilter struct {
	containers map[string]bool // ids or names
	actions    map[string]bool
	labels     []string
	noneMatch  bool // a type filter without "container": nothing matches
}

func parseEventFilters(r *http.Request) (eventFilter, error) {
	var ef eventFilter
	f, err := filters(r)
	if err != nil {
		return ef, err
	}
	for key, vals := range f {
		switch key {
		case "container":
			ef.containers = setOf(vals)
		case "event":
			ef.actions = setOf(vals)
		case "label":
			ef.labels = vals
		case "type":
			ef.noneMatch = !setOf(vals)["container"]
		default:
			return ef, errf(http.StatusBadRequest, "invalid filter '%s' (boxd serves container, event, label and type)", key)
		}
	}
	return ef, nil
}

func setOf(vals []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range vals {
		m[v] = true
	}
	return m
}

// eventTime reads Docker's since and until: unix seconds with an optional
// fraction, or an RFC 3339 time.
func eventTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	sec, frac, _ := strings.Cut(v, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, errf(http.StatusBadRequest, "%s: %q is not a unix timestamp", name, v)
	}
	var ns int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		if ns, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, errf(http.StatusBadRequest, "%s: %q is not a unix timestamp", name, v)
		}
	}
	return time.Unix(s, ns), nil
}

func (s *Server) systemEvents(w http.ResponseWriter, r *http.Request) {
	if s.Events == nil {
		fail(w, errf(http.StatusServiceUnavailable, "this boxd keeps no event log"))
		return
	}
	ef, err := parseEventFilters(r)
	if err != nil {
		fail(w, err)
		return
	}
	since, err := eventTime("since", r.URL.Query().Get("since"))
	if err != nil {
		fail(w, err)
		return
	}
	until, err := eventTime("until", r.URL.Query().Get("until"))
	if err != nil {
		fail(w, err)
		return
	}
	follow := until.IsZero() || until.After(time.Now())
	replay, sub := s.Events.Subscribe(since, events.Filter{Owner: eventsOwner(r.Context())}, follow)
	if sub != nil {
		defer sub.Close()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flushWriter{w}.Write(nil)
	names := &actorCache{s: s, ctx: r.Context(), m: map[string]map[string]string{}}
	send := func(ev events.Event) bool {
		if !until.IsZero() && ev.Time.After(until) {
			return false
		}
		if m, ok := names.dockerEvent(ev, ef); ok {
			return writeBody0(flushWriter{w}, m) == nil
		}
		return true
	}
	for _, ev := range replay {
		if !send(ev) {
			return
		}
	}
	if sub == nil {
		return
	}
	var deadline <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		deadline = t.C
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-deadline:
			return
		case <-sub.Done():
			return
		case ev := <-sub.C():
			if !send(ev) {
				return
			}
		}
	}
}

func eventsOwner(ctx context.Context) *uint32 {
	if isAdmin(ctx) {
		return nil
	}
	c, _ := runtime.CallerFrom(ctx)
	uid := c.UID
	return &uid
}

// actorCache remembers each sandbox's Docker attributes (name, image,
// labels) so a destroy, after which the sandbox is gone, still names it.
type actorCache struct {
	s   *Server
	ctx context.Context
	mu  sync.Mutex
	m   map[string]map[string]string
}

func (a *actorCache) attrs(id string) map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m, ok := a.m[id]; ok {
		return m
	}
	m := map[string]string{}
	if sb, err := a.s.Manager.Get(a.ctx, id); err == nil {
		m["name"] = strings.TrimPrefix(view{sb: sb}.name(), "/")
		m["image"] = sb.Image
		for k, v := range sb.Labels {
			m[k] = v
		}
		a.s.actors.remember(id, func(ai *actorInfo) { ai.attrs = m })
	} else if ai, ok := a.s.actors.get(id); ok {
		m = ai.attrs
	}
	a.m[id] = m
	return m
}

// actors remembers the attributes of recent containers (and the main
// command's exit of those made here) past their removal, so the events
// of a removed container still name it. Bounded: the oldest go first.
type actors struct {
	mu    sync.Mutex
	m     map[string]*actorInfo
	order []string
}

type actorInfo struct {
	attrs    map[string]string
	exitCode *int
}

const maxActors = 4096

func (a *actors) remember(id string, fn func(*actorInfo)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*actorInfo{}
	}
	ai, ok := a.m[id]
	if !ok {
		ai = &actorInfo{attrs: map[string]string{}}
		a.m[id] = ai
		a.order = append(a.order, id)
		if len(a.order) > maxActors {
			delete(a.m, a.order[0])
			a.order = a.order[1:]
		}
	}
	fn(ai)
}

func (a *actors) get(id string) (actorInfo, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ai, ok := a.m[id]
	if !ok {
		return actorInfo{}, false
	}
	return *ai, true
}

// rememberCtr records a container made here under its name, image, labels.
func (s *Server) rememberCtr(id string, cfg ctrConfig) {
	attrs := map[string]string{"name": cfg.Name, "image": cfg.Image}
	if cfg.Name == "" {
		attrs["name"] = id
	}
	for k, v := range cfg.Labels {
		attrs[k] = v
	}
	s.actors.remember(id, func(ai *actorInfo) { ai.attrs = attrs })
}

// dockerEvent is ev in Docker's shape, if it has one and ef lets it by.
func (a *actorCache) dockerEvent(ev events.Event, ef eventFilter) (map[string]any, bool) {
	action, ok := dockerActions[ev.Type]
	if !ok || ef.noneMatch || (ef.actions != nil && !ef.actions[action]) {
		return nil, false
	}
	base := a.attrs(ev.Sandbox)
	attrs := make(map[string]string, len(base)+2)
	for k, v := range base {
		attrs[k] = v
	}
	if ef.containers != nil && !ef.containers[ev.Sandbox] && !ef.containers[attrs["name"]] {
		return nil, false
	}
	for _, l := range ef.labels {
		k, v, hasVal := strings.Cut(l, "=")
		if got, present := attrs[k]; !present || (hasVal && got != v) {
			return nil, false
		}
	}
	switch ev.Type {
	case events.Died:
		// A container made here dies with its main command, whose exit
		// follow records before it stops the sandbox.
		attrs["exitCode"] = ev.Attrs["exit_status"]
		if ai, ok := a.s.actors.get(ev.Sandbox); ok && ai.exitCode != nil {
			attrs["exitCode"] = strconv.Itoa(*ai.exitCode)
		}
	case events.ExecExited:
		attrs["exitCode"] = ev.Attrs["exit_code"]
	}
	status := action
	if strings.HasPrefix(action, "exec_") {
		status += ": " + ev.Attrs["args"]
	}
	return map[string]any{
		"status": status, "id": ev.Sandbox, "from": attrs["image"], "Type": "container", "Action": action,
		"Actor": map[string]any{"ID": ev.Sandbox, "Attributes": attrs}, "scope": "local",
		"time": ev.Time.Unix(), "timeNano": ev.Time.UnixNano(),
	}, true
}
