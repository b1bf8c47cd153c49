//go:build linux

package rpc

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/boxd-dev/boxd/rpc/apiwire"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// TestMetrics: calls are counted by method and code, and the exposition
// is served only to a token of scope metrics (or admin).
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	ts, err := OpenTokens(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, metricsTok, _ := ts.Create("m", 0, ScopeMetrics, time.Hour)
	_, writeTok, _ := ts.Create("w", 0, ScopeWrite, time.Hour)
	sock := filepath.Join(dir, "s.sock")
	uln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tokens: ts, Metrics: NewMetrics(nil)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, uln) }()
	t.Cleanup(func() { cancel(); <-done })
	api := boxdv1connect.NewTokenServiceClient(apiwire.HTTPClient(sock), apiwire.BaseURL)
	for range 3 {
		if _, err := api.ListTokens(ctx, connect.NewRequest(&boxdv1.ListTokensRequest{})); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = api.DeleteToken(ctx, connect.NewRequest(&boxdv1.DeleteTokenRequest{Name: "none"}))

	srv := httptest.NewServer(s.MetricsHandler())
	defer srv.Close()
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code, _ := get(writeTok); code != http.StatusForbidden {
		t.Errorf("write token: %d", code)
	}
	code, body := get(metricsTok)
	for _, want := range []string{
		`boxd_api_calls_total{code="ok",method="ListTokens",service="TokenService"} 3`,
		`boxd_api_calls_total{code="not_found",method="DeleteToken",service="TokenService"} 1`,
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("metrics (%d) lack %q:\n%.2000s", code, want, body)
		}
	}
}
