//go:build linux

package runtime

import (
	"testing"
	"time"
)

// A command cgroup's usage, from files recorded on a cgroup v2 host with
// the memory and io controllers enabled.
func TestReadCgroupUsage(t *testing.T) {
	u, ok := readCgroupUsage("testdata/cgroupv2")
	if !ok {
		t.Fatal("no usage read from testdata/cgroupv2")
	}
	want := cgroupUsage{user: 1816273 * time.Microsecond, system: 919146 * time.Microsecond,
		peak: 91537408, rbytes: 1187840 + 4096, wbytes: 20971520 + 8192}
	if u != want {
		t.Errorf("usage %+v, want %+v", u, want)
	}
	if _, ok := readCgroupUsage(t.TempDir()); ok {
		t.Error("usage read from a cgroup without memory accounting")
	}
}
