//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// BenchmarkExecRoundTrip is the exec round trip of `true` in a running
// busybox sandbox with default limits, through boxd's API, as a client sees
// it: unary Exec and ExecStream from a Go client that keeps its HTTP/2
// connection (internal/rpcclient), and ExecStream in Connect JSON over a fresh
// HTTP/1.1 connection per call (how boxctl's lightweight front calls it).
// It reports each path's median and p90, the figures the latency target is
// about (ns/op is one exec of each path):
//
//	go test ./e2e -run '^$' -bench ExecRoundTrip -benchtime 1000x
func BenchmarkExecRoundTrip(b *testing.B) {
	c := context.Background()
	resp, err := env.api.CreateSandbox(c, connect.NewRequest(&boxdv1.CreateSandboxRequest{}))
	if err != nil {
		b.Fatal(err)
	}
	id := resp.Msg.Sandbox.Id
	b.Cleanup(func() {
		if _, err := env.api.DeleteSandbox(context.Background(), connect.NewRequest(&boxdv1.DeleteSandboxRequest{Id: id})); err != nil {
			b.Errorf("delete %s: %v", id, err)
		}
	})
	req := &boxdv1.ExecRequest{SandboxId: id, Args: []string{"true"}}

	fresh := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", env.socket)
		},
		DisableKeepAlives: true,
	}
	defer fresh.CloseIdleConnections()
	http1 := boxdv1connect.NewSandboxServiceClient(&http.Client{Transport: fresh}, "http://boxd", connect.WithProtoJSON())

	paths := []struct {
		name string
		exec func() (*boxdv1.ExecResult, error)
	}{
		{"unary", func() (*boxdv1.ExecResult, error) {
			r, err := env.api.Exec(c, connect.NewRequest(req))
			if err != nil {
				return nil, err
			}
			return r.Msg.Result, nil
		}},
		{"stream", func() (*boxdv1.ExecResult, error) { return execStream(c, env.api, req) }},
		{"http1", func() (*boxdv1.ExecResult, error) { return execStream(c, http1, req) }},
	}
	// Warm up: first use of the connections and of the code paths.
	for range 10 {
		for _, p := range paths {
			if _, err := p.exec(); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
		}
	}
	// The paths take turns, rotating which goes first, so drift on a
	// shared machine hits all alike; ns/op is one exec of each.
	took := make([][]time.Duration, len(paths))
	added := make([][]time.Duration, len(paths)) // round trip minus the process's own life, per call
	round := 0
	for b.Loop() {
		for k := range paths {
			i := (k + round) % len(paths)
			start := time.Now()
			res, err := paths[i].exec()
			d := time.Since(start)
			took[i] = append(took[i], d)
			if err != nil {
				b.Fatalf("%s: %v", paths[i].name, err)
			}
			if res.GetExitCode() != 0 {
				b.Fatalf("%s: exit %d", paths[i].name, res.GetExitCode())
			}
			added[i] = append(added[i], d-time.Duration(res.GetProcessUsec())*time.Microsecond)
		}
		round++
	}
	ms := func(s []time.Duration, q float64) float64 {
		return float64(s[int(q*float64(len(s)-1))]) / float64(time.Millisecond)
	}
	for i, p := range paths {
		slices.Sort(took[i])
		slices.Sort(added[i])
		b.ReportMetric(ms(took[i], 0.5), p.name+"-median-ms")
		b.ReportMetric(ms(took[i], 0.9), p.name+"-p90-ms")
		b.ReportMetric(ms(added[i], 0.5), p.name+"-added-median-ms")
	}
}

func execStream(ctx context.Context, api boxdv1connect.SandboxServiceClient, req *boxdv1.ExecRequest) (*boxdv1.ExecResult, error) {
	st, err := api.ExecStream(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var res *boxdv1.ExecResult
	for st.Receive() {
		if r := st.Msg().GetResult(); r != nil {
			res = r
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	if res == nil {
		return nil, fmt.Errorf("stream ended without a result")
	}
	return res, nil
}
