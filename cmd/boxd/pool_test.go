//go:build linux

package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/runtime"
)

// poolsFrom runs boxd's flag handling and returns what --warm-pool and
// the config file make of the pools.
func poolsFrom(t *testing.T, config string, args ...string) ([]runtime.PoolSize, error) {
	t.Helper()
	cc, err := runWith(t, config, args...)
	if err != nil {
		return nil, err
	}
	return parsePools(cc, cc.Int("max-sandboxes"))
}

func TestWarmPoolFlag(t *testing.T) {
	const rc, gv = runtime.RuntimeRunc, runtime.RuntimeGvisor
	for _, tc := range []struct {
		config string
		args   []string
		want   []runtime.PoolSize
	}{
		{"", nil, []runtime.PoolSize{{Runtime: rc, Size: defaultPoolSize}}},
		{"", []string{"--warm-pool", "0"}, []runtime.PoolSize{{Runtime: rc, Size: 0}}},
		{"", []string{"--warm-pool", "5"}, []runtime.PoolSize{{Runtime: rc, Size: 5}}},
		{"", []string{"--warm-pool", "python:3.12=3", "--warm-pool", "1"}, []runtime.PoolSize{{Image: "python:3.12", Runtime: rc, Size: 3}, {Runtime: rc, Size: 1}}},
		{`warm-pool = ["a/b:1=4", "c=0"]`, nil, []runtime.PoolSize{{Image: "a/b:1", Runtime: rc, Size: 4}, {Image: "c", Runtime: rc, Size: 0}}},
		{`warm-pool = ["a=4"]`, []string{"--warm-pool", "b=1"}, []runtime.PoolSize{{Image: "b", Runtime: rc, Size: 1}}}, // the flag wins
		// The default shrinks to fit a small --max-sandboxes.
		{"", []string{"--max-sandboxes", "1"}, []runtime.PoolSize{{Runtime: rc, Size: 1}}},
		// gVisor members: a pool of their own next to the image's runc pool;
		// a digest's "@" is in the image part.
		{"", []string{"--warm-pool", "2@gvisor", "--warm-pool", "1"}, []runtime.PoolSize{{Runtime: gv, Size: 2}, {Runtime: rc, Size: 1}}},
		{"", []string{"--warm-pool", "a=3@gvisor", "--warm-pool", "a=1@runc"}, []runtime.PoolSize{{Image: "a", Runtime: gv, Size: 3}, {Image: "a", Runtime: rc, Size: 1}}},
		{"", []string{"--warm-pool", "a@sha256:00=1@gvisor"}, []runtime.PoolSize{{Image: "a@sha256:00", Runtime: gv, Size: 1}}},
		{`warm-pool = ["a=4@gvisor"]`, nil, []runtime.PoolSize{{Image: "a", Runtime: gv, Size: 4}}},
		{"", []string{"--warm-pool", "a=2", "--warm-pool", "a=1@egress"}, []runtime.PoolSize{{Image: "a", Runtime: rc, Size: 2}, {Image: "a", Runtime: rc, Network: "egress", Size: 1}}},
	} {
		got, err := poolsFrom(t, tc.config, tc.args...)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("config %q args %v: %v %v, want %v", tc.config, tc.args, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--warm-pool", "x=many"}, `"x=many"`},
		{[]string{"--warm-pool", "-1"}, `"-1"`},
		{[]string{"--warm-pool", "1001"}, "0 to 1000"},
		{[]string{"--warm-pool", "=3"}, "names no image"},
		{[]string{"--warm-pool", "a=1", "--warm-pool", "a=2"}, "sized twice"},
		{[]string{"--max-sandboxes", "4", "--warm-pool", "a=3", "--warm-pool", "2"}, "--max-sandboxes 4"},
		{[]string{"--warm-pool", "a=1@kata"}, `unknown runtime "kata"`},
		{[]string{"--warm-pool", "a=1@"}, `unknown runtime ""`},
		{[]string{"--warm-pool", "a=1@gvisor", "--warm-pool", "a=2@gvisor"}, "gvisor pool is sized twice"},
		{[]string{"--warm-pool", "a=1@egress", "--warm-pool", "a=2@egress"}, "runc egress pool is sized twice"},
		{[]string{"--max-sandboxes", "4", "--warm-pool", "a=3@gvisor", "--warm-pool", "a=2"}, "--max-sandboxes 4"},
	} {
		_, err := poolsFrom(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), "--warm-pool") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming --warm-pool and %q", tc.args, err, tc.want)
		}
	}
}

// TestWarmPoolGvisorNeedsGvisor: a gVisor pool on a boxd that found no
// gVisor stops it at start, naming the flag and why.
func TestWarmPoolGvisorNeedsGvisor(t *testing.T) {
	pools := []runtime.PoolSize{{Runtime: runtime.RuntimeGvisor, Size: 1}}
	err := checkPoolRuntimes(pools, nil, "runsc missing")
	if err == nil || !strings.Contains(err.Error(), "--warm-pool") || !strings.Contains(err.Error(), "runsc missing") {
		t.Errorf("gvisor pool without gVisor: %v", err)
	}
	if err := checkPoolRuntimes(pools, &runtime.Gvisor{}, ""); err != nil {
		t.Errorf("gvisor pool with gVisor: %v", err)
	}
	if err := checkPoolRuntimes([]runtime.PoolSize{{Runtime: runtime.RuntimeGvisor, Size: 0}, {Runtime: runtime.RuntimeRunc, Size: 2}}, nil, "x"); err != nil {
		t.Errorf("empty gvisor pool and a runc pool without gVisor: %v", err)
	}
}
