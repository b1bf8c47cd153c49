package runtime

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"1048576", 1 << 20, false},
		{"256m", 256 << 20, false},
		{"256M", 256 << 20, false},
		{"256MiB", 256 << 20, false},
		{"256mb", 256 << 20, false},
		{"1g", 1 << 30, false},
		{"1.5g", 3 << 29, false},
		{"512k", 512 << 10, false},
		{"2t", 2 << 40, false},
		{" 64m ", 64 << 20, false},
		{"", 0, true},
		{"m", 0, true},
		{"-1m", 0, true},
		{"12xb", 0, true},
		{"1e9", 0, true},
		{"1 g b", 0, true},
		{"99999999999t", 0, true},
	} {
		got, err := ParseSize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, err=%v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestValidateEnv(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string // substring of the error; empty means valid
	}{
		{[]string{"A=1", "B_2=", "_x=y=z"}, ""},
		{[]string{"=x"}, "empty variable name"},
		{[]string{"NOEQUALS"}, "not K=V"},
		{[]string{"1A=x"}, "must match"},
		{[]string{"A-B=x"}, "must match"},
		{[]string{"A=x\x00y"}, "NUL"},
		{make([]string, MaxEnv+1), "at most"},
		{[]string{"A=" + strings.Repeat("x", MaxEnvBytes)}, "bytes in all"},
	} {
		err := ValidateEnv("env", tc.env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidateEnv(%.40q) = %v, want ok", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "env: ")):
			t.Errorf("ValidateEnv(%.40q) = %v, want an env error containing %q", tc.env, err, tc.want)
		case err != nil && !errdefs.IsInvalidArgument(err):
			t.Errorf("ValidateEnv error %v is not invalid_argument", err)
		}
	}
}

func TestResolve(t *testing.T) {
	m := &Manager{cfg: Config{
		DefaultImage: "boxd/busybox", DefaultLimits: Limits{MemoryBytes: 512 << 20, CPUs: 1, Pids: 256},
		DefaultTTL: time.Hour, MaxMemory: 8 << 30, MaxCPUs: 2,
	}}
	ok := func(req CreateRequest, check func(resolved) bool) {
		t.Helper()
		r, err := m.resolve(req)
		if err != nil || !check(r) {
			t.Errorf("resolve(%+v) = %+v, %v", req, r, err)
		}
	}
	ok(CreateRequest{}, func(r resolved) bool {
		return r.image == "boxd/busybox" && r.limits == m.cfg.DefaultLimits && r.workdir == "" && !r.workdirSet && r.ttl == time.Hour
	})
	ok(CreateRequest{Image: "x", Memory: "64m", CPUs: 0.5, Pids: 16, TTL: "90s", Workdir: "/w", Name: "a.b-c_1"}, func(r resolved) bool {
		return r.image == "x" && r.limits == Limits{MemoryBytes: 64 << 20, CPUs: 0.5, Pids: 16} && r.ttl == 90*time.Second && r.workdir == "/w" && r.name == "a.b-c_1"
	})
	for _, tc := range []struct {
		req   CreateRequest
		field string
	}{
		{CreateRequest{Memory: "lots"}, "limits.memory"},
		{CreateRequest{Memory: "1m"}, "limits.memory"},
		{CreateRequest{Memory: "9g"}, "limits.memory"},
		{CreateRequest{CPUs: -1}, "limits.cpus"},
		{CreateRequest{CPUs: math.NaN()}, "limits.cpus"},
		{CreateRequest{CPUs: math.Inf(1)}, "limits.cpus"},
		{CreateRequest{CPUs: 0.001}, "limits.cpus"},
		{CreateRequest{CPUs: 3}, "limits.cpus"},
		{CreateRequest{Pids: -1}, "limits.pids"},
		{CreateRequest{Pids: MinPids - 1}, "limits.pids"},
		{CreateRequest{Pids: MaxPids + 1}, "limits.pids"},
		{CreateRequest{Env: []string{"=x"}}, "env"},
		{CreateRequest{Workdir: "rel"}, "workdir"},
		{CreateRequest{Name: "-lead"}, "name"},
		{CreateRequest{Name: "has space"}, "name"},
		{CreateRequest{Name: strings.Repeat("a", 64)}, "name"},
		{CreateRequest{Labels: map[string]string{"": "x"}}, "labels"},
		{CreateRequest{Labels: map[string]string{"k": strings.Repeat("v", 1025)}}, "labels"},
		{CreateRequest{TTL: "soon"}, "ttl"},
		{CreateRequest{TTL: "0s"}, "ttl"},
		{CreateRequest{TTL: "800h"}, "ttl"},
	} {
		_, err := m.resolve(tc.req)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errdefs.IsInvalidArgument(err) {
			t.Errorf("resolve(%+v) = %v, want invalid_argument on field %s", tc.req, err, tc.field)
		}
	}
	noDefault := &Manager{cfg: m.cfg}
	noDefault.cfg.DefaultImage = ""
	if _, err := noDefault.resolve(CreateRequest{}); err == nil || !strings.Contains(err.Error(), "image") {
		t.Errorf("no image and no default: %v", err)
	}
}
