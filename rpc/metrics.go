//go:build linux

package rpc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/boxd-dev/boxd/network"
	"github.com/boxd-dev/boxd/runtime"
)

// Metrics are what boxd serves to Prometheus (--metrics-listen): API calls
// by method and code, sandbox creates and deletes by result, create and
// exec latency, and, counted at each scrape, sandboxes by state and
// runtime, each owner's sandboxes and memory against the quotas, init
// restarts and warm pools; plus Go's runtime and process metrics. No
// label is a sandbox id, and an owner label is a uid, so the series grow
// with the number of users, not with the load.
type Metrics struct {
	reg     *prometheus.Registry
	calls   *prometheus.CounterVec
	creates *prometheus.CounterVec
	deletes *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// NewMetrics registers boxd's metrics; m lists the sandboxes at a scrape.
func NewMetrics(m *runtime.Manager) *Metrics {
	mt := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "boxd_api_calls_total",
			Help: "API calls by service, method and result code (ok or the connect code)."}, []string{"service", "method", "code"}),
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "boxd_sandbox_creates_total",
			Help: "Sandbox creates by result code (ok: created)."}, []string{"code"}),
		deletes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "boxd_sandbox_deletes_total",
			Help: "Sandbox deletes by result code (ok: deleted)."}, []string{"code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "boxd_call_duration_seconds",
			Help:    "Duration of creates and execs (the whole call, a streamed exec's included), by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"op"}),
	}
	mt.reg.MustRegister(mt.calls, mt.creates, mt.deletes, mt.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if m != nil {
		mt.reg.MustRegister(sandboxCollector{m})
	}
	return mt
}

// timedOp names the calls whose duration is a histogram's.
func timedOp(procedure string) string {
	switch procedure {
	case "/boxd.v1.SandboxService/CreateSandbox":
		return "create"
	case "/boxd.v1.SandboxService/Exec", "/boxd.v1.SandboxService/ExecStream", "/boxd.v1.ProcessService/Exec":
		return "exec"
	}
	return ""
}

// record counts one finished call.
func (mt *Metrics) record(procedure string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	svc, meth, _ := strings.Cut(strings.TrimPrefix(procedure, "/"), "/")
	svc = strings.TrimPrefix(svc, "boxd.v1.")
	mt.calls.WithLabelValues(svc, meth, code).Inc()
	switch procedure {
	case "/boxd.v1.SandboxService/CreateSandbox":
		mt.creates.WithLabelValues(code).Inc()
	case "/boxd.v1.SandboxService/DeleteSandbox":
		mt.deletes.WithLabelValues(code).Inc()
	}
	if op := timedOp(procedure); op != "" && err == nil {
		mt.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	}
}

// sandboxCollector counts, at each scrape, the sandboxes by state and
// runtime as an admin's ls sees them, what each owner holds against the
// quotas, the inits' restarts, and the warm pools.
type sandboxCollector struct{ m *runtime.Manager }

var (
	sandboxesDesc      = prometheus.NewDesc("boxd_sandboxes", "Sandboxes by state and runtime (warm-pool members not counted).", []string{"state", "runtime"}, nil)
	ownerSandboxesDesc = prometheus.NewDesc("boxd_owner_sandboxes", "Sandboxes each owner (a host uid) holds; the quota is boxd_quota_sandboxes_per_owner.", []string{"owner"}, nil)
	ownerMemoryDesc    = prometheus.NewDesc("boxd_owner_memory_limit_bytes", "Sum of the memory limits of each owner's sandboxes; the quota is boxd_quota_memory_bytes_per_owner.", []string{"owner"}, nil)
	quotaSandboxesDesc = prometheus.NewDesc("boxd_quota_sandboxes_per_owner", "--max-sandboxes-per-user (0: none).", nil, nil)
	quotaMemoryDesc    = prometheus.NewDesc("boxd_quota_memory_bytes_per_owner", "--max-memory-per-user in bytes (0: none).", nil, nil)
	restartsDesc       = prometheus.NewDesc("boxd_init_restarts", "Restarts boxd made of the sandboxes that exist now, summed, by runtime.", []string{"runtime"}, nil)
	poolTargetDesc     = prometheus.NewDesc("boxd_pool_target", "Warm-pool target size by image, runtime and network.", []string{"image", "runtime", "network"}, nil)
	poolMembersDesc    = prometheus.NewDesc("boxd_pool_members", "Warm-pool members by image, runtime, network and state (ready or starting).", []string{"image", "runtime", "network", "state"}, nil)
	poolCreatesDesc    = prometheus.NewDesc("boxd_pool_creates_total", "Creates of a warm pool's image, runtime and network by outcome: handed_out (a member served it), cold_empty (none was ready), cold_unfit (it asked for what a member cannot take on).", []string{"image", "runtime", "network", "outcome"}, nil)
	egressDeniedDesc   = prometheus.NewDesc("boxd_egress_denied_total", "Egress connections and DNS names refused, by reason (unrecorded: past a deny-log window's bound).", []string{"reason"}, nil)
)

func (sandboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sandboxesDesc, ownerSandboxesDesc, ownerMemoryDesc, quotaSandboxesDesc, quotaMemoryDesc, restartsDesc, poolTargetDesc, poolMembersDesc, poolCreatesDesc, egressDeniedDesc} {
		ch <- d
	}
}

func (c sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectPools(ch)
	c.collectCounts(ch)
	q := c.m.Quotas()
	ch <- prometheus.MustNewConstMetric(quotaSandboxesDesc, prometheus.GaugeValue, float64(q.MaxSandboxes))
	ch <- prometheus.MustNewConstMetric(quotaMemoryDesc, prometheus.GaugeValue, float64(q.MaxMemory))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ctx = runtime.WithCaller(ctx, runtime.Caller{UID: 0, Admin: true})
	sbs, err := c.m.ListFiltered(ctx, runtime.ListFilter{All: true})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sandboxesDesc, err)
		return
	}
	type key struct{ state, runtime string }
	n := map[key]int{}
	owners := map[uint32]int{}
	memory := map[uint32]int64{}
	restarts := map[string]int{}
	for _, sb := range sbs {
		n[key{sb.State, sb.Runtime.Name}]++
		owners[sb.OwnerUID]++
		memory[sb.OwnerUID] += sb.Limits.MemoryBytes
		restarts[sb.Runtime.Name] += sb.Restarts.Count
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(v), k.state, k.runtime)
	}
	for uid, v := range owners {
		owner := strconv.FormatUint(uint64(uid), 10)
		ch <- prometheus.MustNewConstMetric(ownerSandboxesDesc, prometheus.GaugeValue, float64(v), owner)
		ch <- prometheus.MustNewConstMetric(ownerMemoryDesc, prometheus.GaugeValue, float64(memory[uid]), owner)
	}
	for rt, v := range restarts {
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.GaugeValue, float64(v), rt)
	}
}

// collectPools reports each warm pool's target and members.
func (c sandboxCollector) collectPools(ch chan<- prometheus.Metric) {
	for _, p := range c.m.PoolStatus() {
		netw := p.Network
		if netw == "" {
			netw = "none"
		}
		ch <- prometheus.MustNewConstMetric(poolTargetDesc, prometheus.GaugeValue, float64(p.Size), p.Image, p.Runtime, netw)
		ch <- prometheus.MustNewConstMetric(poolMembersDesc, prometheus.GaugeValue, float64(p.Ready), p.Image, p.Runtime, netw, "ready")
		ch <- prometheus.MustNewConstMetric(poolMembersDesc, prometheus.GaugeValue, float64(p.Starting), p.Image, p.Runtime, netw, "starting")
		for outcome, n := range map[string]uint64{"handed_out": p.HandedOut, "cold_empty": p.ColdEmpty, "cold_unfit": p.ColdUnfit} {
			ch <- prometheus.MustNewConstMetric(poolCreatesDesc, prometheus.CounterValue, float64(n), p.Image, p.Runtime, netw, outcome)
		}
	}
}

// collectCounts reports the runtime's counters since start. Every reason
// is reported, at 0 until a refusal, so rates work from the first scrape.
func (c sandboxCollector) collectCounts(ch chan<- prometheus.Metric) {
	n := c.m.Counts()
	for _, reason := range network.DenyReasons {
		ch <- prometheus.MustNewConstMetric(egressDeniedDesc, prometheus.CounterValue, float64(n.EgressDenied[reason]), reason)
	}
}

// MetricsHandler serves the exposition to callers with a token of scope
// metrics (or admin), failures limited per address as on the API.
func (s *Server) MetricsHandler() http.Handler {
	lim := newAuthLimiter()
	h := promhttp.HandlerFor(s.Metrics.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			addr = r.RemoteAddr
		}
		now := time.Now()
		if _, ok := lim.blocked(addr, now); ok {
			http.Error(w, "too many failed authentications", http.StatusTooManyRequests)
			return
		}
		t, err := s.remoteIdentity(r)
		if err == nil && t.Scope != ScopeMetrics && t.Scope != ScopeAdmin {
			http.Error(w, "the token's scope "+t.Scope+" does not allow metrics (scope metrics)", http.StatusForbidden)
			return
		}
		if err != nil {
			lim.fail(addr, now)
			w.Header().Set("WWW-Authenticate", `Bearer realm="boxd"`)
			http.Error(w, errors.Unwrap(connect.NewError(connect.CodeUnauthenticated, err)).Error(), http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
