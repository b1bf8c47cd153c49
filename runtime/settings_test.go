package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Every tunable is checked against boxd's ceilings; a bad one is
// invalid_argument naming its field.
func TestResolveTunables(t *testing.T) {
	lim := Limits{MemoryBytes: 256 << 20, CPUs: 1, Pids: 256}
	got, err := resolveTunables(TunablesRequest{
		ReadOnly: true, Tmpfs: []string{"/tmp:32m", "/dev/shm:1m", "/cache"}, Ulimits: []string{"nofile=4096,nproc=100", "cpu=60", "fsize=1g"},
		Hostname: "web-1.example", CPUWeight: 500, MemoryLow: "64m", ExecTimeout: "2m", OutputLimit: 1 << 20,
	}, lim)
	if err != nil {
		t.Fatal(err)
	}
	want := Tunables{
		ReadOnly: true,
		Tmpfs:    []TmpfsMount{{"/tmp", 32 << 20}, {"/dev/shm", 1 << 20}, {"/cache", 64 << 20}},
		Ulimits:  Ulimits{NoFile: 4096, NProc: 100, CPU: 60, FSize: 1 << 30},
		Hostname: "web-1.example", CPUWeight: 500, MemoryLow: 64 << 20, ExecTimeout: 2 * time.Minute, OutputLimit: 1 << 20,
	}
	if got.ReadOnly != want.ReadOnly || len(got.Tmpfs) != 3 || got.Tmpfs[0] != want.Tmpfs[0] || got.Tmpfs[1] != want.Tmpfs[1] || got.Tmpfs[2] != want.Tmpfs[2] ||
		got.Ulimits != want.Ulimits || got.Hostname != want.Hostname || got.CPUWeight != want.CPUWeight || got.MemoryLow != want.MemoryLow ||
		got.ExecTimeout != want.ExecTimeout || got.OutputLimit != want.OutputLimit {
		t.Fatalf("resolveTunables = %+v, want %+v", got, want)
	}
	if got.defaultSpec() {
		t.Error("defaultSpec() is true for a sandbox with tunables")
	}
	for _, tc := range []struct {
		req   TunablesRequest
		field string
	}{
		{TunablesRequest{Tmpfs: []string{"/proc/x"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: []string{"/.boxd"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: []string{"/dev/pts"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: []string{"/sys"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: []string{"relative"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: []string{"/a/../b"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: []string{"/"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: []string{"/big:1g"}}, "tmpfs"}, // above the memory limit
		{TunablesRequest{Tmpfs: []string{"/x:lots"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: []string{"/x", "/x"}}, "tmpfs"},
		{TunablesRequest{Tmpfs: strings.Split("/a /b /c /d /e /f /g /h /i", " ")}, "tmpfs"},
		{TunablesRequest{Ulimits: []string{"nofile=lots"}}, "ulimits"},
		{TunablesRequest{Ulimits: []string{"nofile"}}, "ulimits"},
		{TunablesRequest{Ulimits: []string{"nofile=0"}}, "ulimits"},
		{TunablesRequest{Ulimits: []string{"nofile=2000000"}}, "ulimits"}, // above MaxNoFile
		{TunablesRequest{Ulimits: []string{"memlock=1"}}, "ulimits"},
		{TunablesRequest{Ulimits: []string{"fsize=2t"}}, "ulimits"},
		{TunablesRequest{Ulimits: []string{"cpu=-1"}}, "ulimits"},
		{TunablesRequest{Hostname: "-bad"}, "hostname"},
		{TunablesRequest{Hostname: "under_score"}, "hostname"},
		{TunablesRequest{Hostname: "a..b"}, "hostname"},
		{TunablesRequest{Hostname: strings.Repeat("a", 65)}, "hostname"},
		{TunablesRequest{CPUWeight: 10001}, "cpu_weight"},
		{TunablesRequest{MemoryLow: "512m"}, "memory_low"},
		{TunablesRequest{MemoryLow: "x"}, "memory_low"},
		{TunablesRequest{ExecTimeout: "forever"}, "exec_timeout"},
		{TunablesRequest{ExecTimeout: "800h"}, "exec_timeout"},
		{TunablesRequest{OutputLimit: -1}, "output_limit"},
		{TunablesRequest{OutputLimit: 2 << 30}, "output_limit"},
	} {
		_, err := resolveTunables(tc.req, lim)
		if err == nil || !errdefs.IsInvalidArgument(err) || !strings.HasPrefix(err.Error(), tc.field+": ") {
			t.Errorf("resolveTunables(%+v) = %v, want invalid_argument naming %s", tc.req, err, tc.field)
		}
	}
}

// The image's USER and WORKDIR apply unless the request names its own.
func TestWithImage(t *testing.T) {
	cfg := ocispec.ImageConfig{User: "agent", WorkingDir: "/home/agent/work/"}
	r, err := withImage(resolved{}, cfg)
	if err != nil || r.user != "agent" || r.workdir != "/home/agent/work" {
		t.Fatalf("withImage = %+v, %v; want the image's user and workdir", r, err)
	}
	r, err = withImage(resolved{user: "0", userSet: true, workdir: "/w", workdirSet: true}, cfg)
	if err != nil || r.user != "0" || r.workdir != "/w" {
		t.Fatalf("withImage = %+v, %v; want the request's user and workdir", r, err)
	}
	r, err = withImage(resolved{}, ocispec.ImageConfig{})
	if err != nil || r.user != "" || r.workdir != "/workspace" {
		t.Fatalf("withImage = %+v, %v; want root and /workspace", r, err)
	}
	if _, err := withImage(resolved{}, ocispec.ImageConfig{User: "a b"}); err == nil || !errdefs.IsInvalidArgument(err) {
		t.Fatalf("an image USER that is no user spec: %v, want invalid_argument", err)
	}
}

func TestCPUSharesRoundTrip(t *testing.T) {
	for _, w := range []uint64{1, 2, 100, 500, 1234, 10000} {
		// runc's conversion from shares to cpu.weight.
		s := cpuShares(w)
		if back := 1 + ((s-2)*9999)/262142; back != w {
			t.Errorf("weight %d -> shares %d -> weight %d", w, s, back)
		}
	}
}

func TestMergeEnvList(t *testing.T) {
	got := mergeEnvList([]string{"A=1", "B=2"}, []string{"B=3", "C=4", "A=5"})
	if strings.Join(got, " ") != "A=5 B=3 C=4" {
		t.Fatalf("mergeEnvList = %v", got)
	}
}

func TestParseGrace(t *testing.T) {
	if d, err := ParseGrace("timeout", ""); err != nil || d != DefaultStopGrace {
		t.Fatalf("ParseGrace(\"\") = %v, %v", d, err)
	}
	for _, s := range []string{"soon", "-1s", "11m"} {
		if _, err := ParseGrace("timeout", s); err == nil || !errdefs.IsInvalidArgument(err) {
			t.Errorf("ParseGrace(%q) = %v, want invalid_argument", s, err)
		}
	}
}
