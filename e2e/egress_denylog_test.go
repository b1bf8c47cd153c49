//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// denial is one record of `boxctl network log --json`.
type denial struct {
	First  string `json:"first"`
	Dest   string `json:"dest"`
	Port   uint32 `json:"port"`
	Proto  string `json:"proto"`
	Reason string `json:"reason"`
	Count  string `json:"count"` // protojson writes uint64 as a string
}

func (e *egressNet) denials(t *testing.T, id string) []denial {
	t.Helper()
	var out []denial
	must(t, json.Unmarshal([]byte(e.must(t, "network", "log", "--json", id)), &out))
	return out
}

// find is the record of dest, port, proto and reason with the highest
// count, and that count.
func findDenial(ds []denial, dest string, port uint32, proto, reason string) (denial, int) {
	var best denial
	n := 0
	for _, d := range ds {
		if d.Dest == dest && d.Port == port && d.Proto == proto && d.Reason == reason {
			if c, _ := strconv.Atoi(d.Count); c > n {
				best, n = d, c
			}
		}
	}
	return best, n
}

// TestEgressDenyLog: what boxd refuses an egress sandbox (a host outside
// its allowlist, the metadata server, a name it may not resolve, a name
// with hostile bytes) is in `boxctl network log` and in egress_denied
// events, aggregated with a count; a flood of distinct refusals stays
// within the bounds; `network allow` then lets the same connection
// through. (Another user's network log is not_found: TestOwnership's
// NetworkLog row.)
func TestEgressDenyLog(t *testing.T) {
	e := newEgressNet(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // in boxd's namespace
	e.start(t, "--metrics-listen", metricsAddr)
	t.Cleanup(func() { e.stop(t, syscall.SIGTERM) })
	e.must(t, "image", "import", "--rootfs", env.busybox, "--name", testImage)
	start := time.Now()
	id := e.create(t, h1Addr+"/32:80")
	e.reaches(t, id, "http://"+h1Addr+"/", "h1")
	for range 3 {
		e.refused(t, id, "http://"+h2Addr+"/")
	}
	e.refused(t, id, "http://"+metaAddr+"/")
	for range 2 {
		if got := e.lookup(t, id, "denied.test"); len(got) != 0 {
			t.Fatalf("denied.test resolved to %v", got)
		}
	}
	// A name with an escape sequence and a quote in it.
	connflood(t, e.boxctl, id)
	if out := e.must(t, "exec", id, "--", "/tmp/connflood", "ask", "10.213.0.1:53", `x\027[31m\034y.test.`); out != "NXDOMAIN" {
		t.Errorf("the hostile name got %q", out)
	}

	ds := e.denials(t, id)
	// Each refused connect is a SYN and, when the kernel's ICMP rate
	// limit held back the refusal, its retry: 3 or more.
	if _, n := findDenial(ds, h2Addr, 80, "tcp", "not_allowed"); n < 3 {
		t.Errorf("no record of 3+ refusals of %s:80 (not_allowed): %+v", h2Addr, ds)
	}
	if _, n := findDenial(ds, metaAddr, 80, "tcp", "blocked"); n < 1 {
		t.Errorf("no record of %s:80 (blocked): %+v", metaAddr, ds)
	}
	if _, n := findDenial(ds, "denied.test", 53, "dns", "name_not_allowed"); n < 2 {
		t.Errorf("no record of 2+ lookups of denied.test: %+v", ds)
	}
	if _, n := findDenial(ds, `x\027\09131m\034y.test`, 53, "dns", "name_not_allowed"); n < 1 {
		t.Errorf("the hostile name is not in the log, escaped: %+v", ds)
	}
	if _, n := findDenial(ds, h1Addr, 80, "tcp", "not_allowed"); n != 0 {
		t.Errorf("an allowed connection is in the deny log: %+v", ds)
	}

	// At the end of the window each record is an event, with its count.
	deadline := time.Now().Add(25 * time.Second)
	for {
		out := e.must(t, "events", "--since", start.Add(-time.Second).Format(time.RFC3339Nano), "--no-follow", "--json",
			"-f", "type=egress_denied", "-f", "sandbox="+id)
		found := false
		for _, l := range strings.Split(out, "\n") {
			var ev struct {
				Attrs map[string]string `json:"attrs"`
			}
			if json.Unmarshal([]byte(l), &ev) == nil && ev.Attrs["dest"] == h2Addr && ev.Attrs["port"] == "80" &&
				ev.Attrs["reason"] == "not_allowed" && ev.Attrs["first"] != "" {
				// Each refused connect is a SYN and, when the kernel's
				// ICMP rate limit held back the refusal, its retry.
				if n, _ := strconv.Atoi(ev.Attrs["count"]); n >= 3 {
					found = true
				}
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no egress_denied event for %s:80 with a count of 3 or more: %s", h2Addr, out)
		}
		time.Sleep(time.Second)
	}

	// The metrics count the window's refusals by reason.
	denied := e.metrics(t, metricsAddr)
	if n := denied[`boxd_egress_denied_total{reason="not_allowed"}`]; n < 3 {
		t.Errorf("boxd_egress_denied_total{not_allowed} = %v, want 3 or more", n)
	}
	if n := denied[`boxd_egress_denied_total{reason="name_not_allowed"}`]; n < 3 {
		t.Errorf("boxd_egress_denied_total{name_not_allowed} = %v, want 3 or more", n)
	}

	// A flood of refusals to 20,000 distinct destinations: the log keeps
	// at most 64 records a window plus one that counts the rest, and
	// at most 256 in all.
	for range 3 {
		if out := e.must(t, "exec", id, "--", "/tmp/connflood", "spray", "198.18.1", "20000"); out != "sent 20000" {
			t.Fatalf("spray: %q", out)
		}
	}
	ds = e.denials(t, id)
	if len(ds) > 256+65 {
		t.Errorf("the deny log holds %d records after the flood", len(ds))
	}
	if _, n := findDenial(ds, "", 0, "", "unrecorded"); n == 0 {
		t.Errorf("no unrecorded count after the flood: %d records", len(ds))
	}
	time.Sleep(11 * time.Second) // one window more
	if ds = e.denials(t, id); len(ds) > 256 {
		t.Errorf("the deny log keeps %d records", len(ds))
	}

	// What the log showed, allowed live, goes through.
	e.must(t, "network", "allow", id, h2Addr+":80", "denied.test")
	e.reaches(t, id, "http://"+h2Addr+"/", "h2")
	if got := e.lookup(t, id, "denied.test"); strings.Join(got, ",") != h2Addr {
		t.Errorf("denied.test after network allow resolved to %v", got)
	}

	// A sandbox without egress has no deny log.
	none := e.must(t, "create", "--memory", "64m")
	t.Cleanup(func() { _, _, _ = e.boxctl("rm", "-f", none) })
	if _, stderr, code := e.boxctl("network", "log", none); code == 0 || !strings.Contains(stderr, "failed_precondition") {
		t.Errorf("network log of a none sandbox: exit %d, %s", code, stderr)
	}
}

// metrics reads boxd's /metrics in its network namespace (with Debian's
// python3, through nsenter) with a token of scope metrics, and returns the
// boxd_ samples by series.
func (e *egressNet) metrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	tok := strings.TrimSpace(e.must(t, "token", "create", "metrics-reader", "--scope", "metrics"))
	script := `import sys, urllib.request
r = urllib.request.Request("http://" + sys.argv[1] + "/metrics", headers={"Authorization": "Bearer " + sys.argv[2]})
sys.stdout.write(urllib.request.urlopen(r, timeout=10).read().decode())`
	out, err := exec.Command("nsenter", "--net=/run/netns/"+e.b, "/usr/bin/python3", "-c", script, addr, tok).CombinedOutput()
	if err != nil {
		t.Fatalf("read metrics: %v\n%s", err, out)
	}
	samples := map[string]float64{}
	for _, l := range strings.Split(string(out), "\n") {
		series, v, ok := strings.Cut(l, " ")
		if !ok || !strings.HasPrefix(series, "boxd_") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			samples[series] = f
		}
	}
	return samples
}
