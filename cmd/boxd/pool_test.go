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
	for _, tc := range []struct {
		config string
		args   []string
		want   []runtime.PoolSize
	}{
		{"", nil, []runtime.PoolSize{{Size: defaultPoolSize}}},
		{"", []string{"--warm-pool", "0"}, []runtime.PoolSize{{Size: 0}}},
		{"", []string{"--warm-pool", "5"}, []runtime.PoolSize{{Size: 5}}},
		{"", []string{"--warm-pool", "python:3.12=3", "--warm-pool", "1"}, []runtime.PoolSize{{Image: "python:3.12", Size: 3}, {Size: 1}}},
		{`warm-pool = ["a/b:1=4", "c=0"]`, nil, []runtime.PoolSize{{Image: "a/b:1", Size: 4}, {Image: "c", Size: 0}}},
		{`warm-pool = ["a=4"]`, []string{"--warm-pool", "b=1"}, []runtime.PoolSize{{Image: "b", Size: 1}}}, // the flag wins
		// The default shrinks to fit a small --max-sandboxes.
		{"", []string{"--max-sandboxes", "1"}, []runtime.PoolSize{{Size: 1}}},
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
	} {
		_, err := poolsFrom(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), "--warm-pool") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming --warm-pool and %q", tc.args, err, tc.want)
		}
	}
}
