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
// connection (rpc/client), and ExecStream in Connect JSON over a fresh
// HTTP/1.1 connection per call (how boxctl's lightweight front calls it).
// Besides ns/op (a mean) it reports the median and p90, the figures the
// latency target is about:
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

	for _, bc := range []struct {
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
		{"http1-fresh-stream", func() (*boxdv1.ExecResult, error) { return execStream(c, http1, req) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// Warm up: first use of the connection and of the code paths.
			for range 10 {
				if _, err := bc.exec(); err != nil {
					b.Fatal(err)
				}
			}
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				res, err := bc.exec()
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if res.GetExitCode() != 0 {
					b.Fatalf("exit %d", res.GetExitCode())
				}
			}
			slices.Sort(took)
			ms := func(q float64) float64 {
				return float64(took[int(q*float64(len(took)-1))]) / float64(time.Millisecond)
			}
			b.ReportMetric(ms(0.5), "median-ms")
			b.ReportMetric(ms(0.9), "p90-ms")
		})
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
