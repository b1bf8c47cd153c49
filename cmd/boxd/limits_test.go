//go:build linux

package main

import (
	"strings"
	"testing"
)

// Bad limit flags stop boxd before it touches containerd, naming the flag.
func TestLimitFlagsRejected(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-memory-total", "12q"}, "--max-memory-total"},
		{[]string{"--max-memory-total", "-1g"}, "--max-memory-total"},
		{[]string{"--max-memory-total", "100m"}, "below --default-memory"},
		{[]string{"--default-memory", "lots"}, "--default-memory"},
		{[]string{"--max-pids-total", "-5"}, "--max-pids-total"},
		{[]string{"--max-pids-total", "100"}, "below --default-pids 256"},
		{[]string{"--max-pids-total", "many"}, "max-pids-total"},
		{[]string{"--max-sandboxes", "-1"}, "--max-sandboxes"},
		{[]string{"--max-sandboxes", "2", "--warm-pool", "3"}, "--warm-pool"},
		{[]string{"--max-connections", "-1"}, "--max-connections"},
		{[]string{"--conn-idle-timeout", "-1s"}, "--conn-idle-timeout"},
		{[]string{"--conn-idle-timeout", "5 minutes"}, "conn-idle-timeout"},
	} {
		app := newApp()
		app.Writer, app.ErrWriter = new(strings.Builder), new(strings.Builder)
		err := app.Run(append([]string{"boxd", "--init-binary", "/nonexistent", "--containerd", "/nonexistent"}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("boxd %v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}

// Good values, and 0 for "no limit", pass the checks (boxd then fails
// later, on the missing init binary).
func TestLimitFlagsAccepted(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--max-memory-total", "0", "--max-pids-total", "0", "--max-sandboxes", "0", "--max-connections", "0", "--conn-idle-timeout", "0"},
		{"--max-memory-total", "2g", "--max-pids-total", "300", "--max-sandboxes", "5", "--warm-pool", "5"},
	} {
		app := newApp()
		err := app.Run(append([]string{"boxd", "--init-binary", "/nonexistent"}, args...))
		if err == nil || !strings.Contains(err.Error(), "boxd-init not found") {
			t.Errorf("boxd %v: %v, want the checks to pass", args, err)
		}
	}
}

func TestDefaultsFromHost(t *testing.T) {
	h := hostFacts{memory: 23 << 30, pids: 32768}
	if got := h.memoryTotal(); got != (23<<30-(23<<30)/10)&^(1<<20-1) {
		t.Errorf("memory total on 23 GiB = %d", got)
	}
	if got := (hostFacts{memory: 2 << 30}).memoryTotal(); got != 1<<30 {
		t.Errorf("memory total on 2 GiB = %d, want 1 GiB (at least 1 GiB reserved)", got)
	}
	if got := h.pidsTotal(); got != 16384 {
		t.Errorf("pids total = %d", got)
	}
	if got := h.maxSandboxes(); got < 200 || got > 300 {
		t.Errorf("max sandboxes on 23 GiB = %d", got)
	}
	if got := (hostFacts{memory: 512 << 20, pids: 32768}).maxSandboxes(); got != 16 {
		t.Errorf("max sandboxes on a tiny host = %d, want the floor of 16", got)
	}
	for n, want := range map[int64]string{1 << 30: "1g", 3 << 20: "3m", 1536 << 20: "1536m", 1000: "1000"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
