//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boxd-dev/boxd/internal/testenv"
)

// TestMetricsPrometheus: a real Prometheus (Debian's binary) scrapes
// boxd's --metrics-listen with a token of scope metrics; PromQL through
// Prometheus's HTTP API sees a create and an exec counted, the latency
// histogram filled, the owner's sandboxes and the warm pool.
func TestMetricsPrometheus(t *testing.T) {
	prom, err := testenv.Prometheus()
	if err != nil {
		t.Fatalf("prometheus: %v", err)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	d := startBoxd(t, "boxd-e2e-prom", true, "--metrics-listen", metricsAddr, "--warm-pool", "1", "--max-sandboxes-per-user", "7")
	tok, stderr, code := d.boxctl("token", "create", "prometheus", "--scope", "metrics")
	if code != 0 {
		t.Fatalf("token create: %s", stderr)
	}
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte(strings.TrimSpace(tok)), 0o600); err != nil {
		t.Fatal(err)
	}
	id, stderr, code := d.boxctl("create", "--ttl", "10m")
	if code != 0 {
		t.Fatalf("create: %s", stderr)
	}
	if _, stderr, code := d.boxctl("exec", strings.TrimSpace(id), "--", "true"); code != 0 {
		t.Fatalf("exec: %s", stderr)
	}

	alerts, err := filepath.Abs("../deploy/prometheus/boxd-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(filepath.Dir(prom), "promtool"), "check", "rules", alerts).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ['%s']
scrape_configs:
  - job_name: boxd
    authorization:
      credentials_file: %s
    static_configs:
      - targets: ['%s']
`, alerts, tokFile, metricsAddr)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, prom, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	var promLog strings.Builder
	cmd.Stdout, cmd.Stderr = &promLog, &promLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })

	for query, want := range map[string]float64{
		`up{job="boxd"}`:                                        1,
		`boxd_sandbox_creates_total{code="ok"}`:                 1,
		`boxd_call_duration_seconds_count{op="exec"}`:           1,
		`sum(boxd_call_duration_seconds_bucket{op="create"})`:   1,
		`boxd_owner_sandboxes{owner="0"}`:                       1,
		`boxd_quota_sandboxes_per_owner`:                        7,
		`sum(boxd_pool_target{image=~".*boxd/busybox:latest"})`: 1,
		`count(boxd_pool_creates_total)`:                        3,
		`count(boxd_egress_denied_total)`:                       5,
	} {
		if got := promQuery(t, promAddr, query, want, &promLog); got < want {
			t.Errorf("%s = %v through Prometheus, want at least %v", query, got, want)
		}
	}
	shippedQueriesWork(t, promAddr, alerts)
}

// shippedQueriesWork checks the example alerts and the dashboard against
// the Prometheus that scrapes boxd: every rule evaluates without error,
// every dashboard query parses and runs, and every boxd metric either
// names is one boxd serves.
func shippedQueriesWork(t *testing.T, promAddr, alerts string) {
	t.Helper()
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct{ Name, Health, LastError string }
			}
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		promGet(t, promAddr, "/api/v1/rules", &rules)
		evaluated := 0
		for _, g := range rules.Data.Groups {
			for _, r := range g.Rules {
				if r.Health == "err" {
					t.Errorf("alert %s fails to evaluate: %s", r.Name, r.LastError)
				}
				if r.Health == "ok" {
					evaluated++
				}
			}
		}
		if evaluated >= 9 || time.Now().After(deadline) {
			if evaluated < 9 {
				t.Errorf("%d alert rules evaluated, want all 9: %+v", evaluated, rules)
			}
			break
		}
	}
	var names struct{ Data []string }
	promGet(t, promAddr, "/api/v1/label/__name__/values", &names)
	served := map[string]bool{}
	for _, n := range names.Data {
		served[n] = true
	}
	alertText, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(alerts), "..", "grafana", "boxd-dashboard.json"))
	if err != nil || json.Unmarshal(raw, &dash) != nil || len(dash.Panels) == 0 {
		t.Fatalf("dashboard: %v", err)
	}
	all := string(alertText)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			all += "\n" + tg.Expr
			q := strings.NewReplacer("$instance", ".*", "$__rate_interval", "1m").Replace(tg.Expr)
			var r struct{ Status, Error string }
			promGet(t, promAddr, "/api/v1/query?query="+url.QueryEscape(q), &r)
			if r.Status != "success" {
				t.Errorf("dashboard panel %q: %s: %s", p.Title, tg.Expr, r.Error)
			}
		}
	}
	for _, name := range regexp.MustCompile(`\bboxd_[a-z_]+`).FindAllString(all, -1) {
		if !served[name] {
			t.Errorf("%s is named by the alerts or the dashboard but boxd does not serve it", name)
		}
	}
}

// promGet decodes a JSON answer of Prometheus's HTTP API into v.
func promGet(t *testing.T, addr, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// promQuery asks Prometheus for query until its one sample reaches want
// (scrapes come each second) or 60 s pass, and returns the last value.
func promQuery(t *testing.T, addr, query string, want float64, log *strings.Builder) float64 {
	t.Helper()
	last := -1.0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
		if err != nil {
			continue // not listening yet
		}
		var r struct {
			Status string
			Data   struct {
				Result []struct {
					Value [2]any
				}
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || r.Status != "success" || len(r.Data.Result) != 1 {
			continue
		}
		s, _ := r.Data.Result[0].Value[1].(string)
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			if last = v; v >= want {
				return v
			}
		}
	}
	t.Logf("prometheus log:\n%s", log.String())
	return last
}
