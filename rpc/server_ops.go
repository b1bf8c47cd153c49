//go:build linux

package rpc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/containerd/errdefs"

	"github.com/boxd-dev/boxd/internal/events"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/runtime"
)

func (s *Server) PauseSandbox(ctx context.Context, req *connect.Request[boxdv1.PauseSandboxRequest]) (*connect.Response[boxdv1.PauseSandboxResponse], error) {
	if err := s.Manager.Pause(ctx, req.Msg.Id, runtime.PauseByUser); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.PauseSandboxResponse{}), nil
}

func (s *Server) UnpauseSandbox(ctx context.Context, req *connect.Request[boxdv1.UnpauseSandboxRequest]) (*connect.Response[boxdv1.UnpauseSandboxResponse], error) {
	if err := s.Manager.Resume(ctx, req.Msg.Id, "user"); err != nil {
		return nil, ToConnect(err)
	}
	return connect.NewResponse(&boxdv1.UnpauseSandboxResponse{}), nil
}

func usageProto(u *runtime.Usage) *boxdv1.Usage {
	if u == nil {
		return nil
	}
	return &boxdv1.Usage{
		MemoryBytes: u.MemoryBytes, MemoryPeakBytes: u.MemoryPeak, CpuUsec: u.CPUUsec, Pids: u.Pids, OomKills: u.OOMKills,
		MemoryLimitBytes: u.MemoryLimit, BlockReadBytes: u.BlockReadBytes, BlockWriteBytes: u.BlockWriteBytes,
		Network: u.Network, NetRxBytes: u.NetRxBytes, NetTxBytes: u.NetTxBytes,
	}
}

// Stats samples at once (the base for CPU percent), then sends a sample
// per interval: one, or until the client goes away with stream.
func (s *Server) Stats(ctx context.Context, req *connect.Request[boxdv1.StatsRequest], stream *connect.ServerStream[boxdv1.StatsResponse]) error {
	interval := time.Second
	if v := req.Msg.Interval; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > time.Minute {
			return ToConnect(fmt.Errorf("interval: %q must be a duration from 100ms to 1m: %w", v, errdefs.ErrInvalidArgument))
		}
		interval = d
	}
	prev, err := s.Manager.Stats(ctx, req.Msg.Ids)
	if err != nil {
		return ToConnect(err)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err := s.Manager.Stats(ctx, req.Msg.Ids)
		if err != nil {
			return ToConnect(err) // a named sandbox went away, or containerd failed
		}
		before := map[string]runtime.Stats{}
		for _, p := range prev {
			before[p.ID] = p
		}
		msg := &boxdv1.StatsResponse{At: ts(time.Now())}
		for _, c := range cur {
			st := &boxdv1.SandboxStats{Id: c.ID, Name: c.Name, State: c.State, MemoryLimitBytes: c.MemoryLimit, Usage: usageProto(&c.Usage)}
			if p, ok := before[c.ID]; ok && c.Usage.CPUUsec >= p.Usage.CPUUsec && c.At.After(p.At) {
				st.CpuPercent = float64(c.Usage.CPUUsec-p.Usage.CPUUsec) / float64(c.At.Sub(p.At).Microseconds()) * 100
			}
			msg.Sandboxes = append(msg.Sandboxes, st)
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
		if !req.Msg.Stream {
			return nil
		}
		prev = cur
	}
}

// eventServer serves EventService from the daemon's event log.
type eventServer struct{ s *Server }

// parseSince reads an RFC 3339 time or a duration ago.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since: %q is neither an RFC 3339 time nor a duration such as 10m: %w", v, errdefs.ErrInvalidArgument)
}

// parseFilters reads KEY=VALUE filters; an unknown key or type is named.
func parseFilters(fs []string) (events.Filter, error) {
	var f events.Filter
	for _, kv := range fs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return f, fmt.Errorf("filters: %q is not KEY=VALUE (keys: sandbox, type): %w", kv, errdefs.ErrInvalidArgument)
		}
		switch k {
		case "sandbox":
			if f.Sandboxes == nil {
				f.Sandboxes = map[string]bool{}
			}
			f.Sandboxes[v] = true
		case "type":
			known := false
			for _, t := range events.Types {
				known = known || t == v
			}
			if !known {
				return f, fmt.Errorf("filters: unknown event type %q (types: %s): %w", v, strings.Join(events.Types, ", "), errdefs.ErrInvalidArgument)
			}
			if f.Types == nil {
				f.Types = map[string]bool{}
			}
			f.Types[v] = true
		default:
			return f, fmt.Errorf("filters: unknown filter key %q (keys: sandbox, type): %w", k, errdefs.ErrInvalidArgument)
		}
	}
	return f, nil
}

func eventProto(ev events.Event) *boxdv1.Event {
	return &boxdv1.Event{Seq: ev.Seq, Time: ev.Time.UTC().Format(time.RFC3339Nano), Type: ev.Type, Sandbox: ev.Sandbox, OwnerUid: ev.Owner, Attrs: ev.Attrs}
}

// eventsOwner is the uid whose events alone ctx's caller may see, or nil
// for an admin, who sees every event. A caller the gate let in always has
// an identity; one without (it cannot happen) sees root's events only.
func eventsOwner(ctx context.Context) *uint32 {
	c, ok := runtime.CallerFrom(ctx)
	if ok && (c.Admin || c.Unchecked) {
		return nil
	}
	uid := c.UID
	return &uid
}

func (e *eventServer) Events(ctx context.Context, req *connect.Request[boxdv1.EventsRequest], stream *connect.ServerStream[boxdv1.EventsResponse]) error {
	since, err := parseSince(req.Msg.Since, time.Now())
	if err != nil {
		return ToConnect(err)
	}
	f, err := parseFilters(req.Msg.Filters)
	if err != nil {
		return ToConnect(err)
	}
	if e.s.Events == nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("events: this boxd keeps no event log"))
	}
	f.Owner = eventsOwner(ctx)
	replay, sub := e.s.Events.Subscribe(since, f, req.Msg.Follow)
	if sub != nil {
		defer sub.Close()
	}
	for _, ev := range replay {
		if err := stream.Send(&boxdv1.EventsResponse{Event: eventProto(ev)}); err != nil {
			return err
		}
	}
	if sub == nil {
		return nil
	}
	// A client's call returns once the first message arrives: without
	// this a follower with nothing to replay would wait for an event.
	if err := stream.Send(&boxdv1.EventsResponse{Live: true}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Done():
			if sub.Err() == events.ErrSlow {
				return connect.NewError(connect.CodeResourceExhausted, sub.Err())
			}
			return connect.NewError(connect.CodeUnavailable, fmt.Errorf("events: %v", sub.Err()))
		case ev := <-sub.C():
			if err := stream.Send(&boxdv1.EventsResponse{Event: eventProto(ev)}); err != nil {
				return err
			}
		}
	}
}
