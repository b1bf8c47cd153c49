//go:build linux

// Room: resources. Block I/O accounting on cgroup v1.

package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
)

// Block I/O accounting on cgroup v1. Recent kernels (6.x here) count a v1
// cgroup's blkio.throttle.io_service_bytes only for bios that pass a
// throttle rule: without one, a sandbox's stats show 0 bytes however much
// it writes. boxd gives each sandbox a rule far above any device's speed
// (2^62 bytes/s) for every block device, which limits nothing and turns
// the counting on. v2's io.stat counts always and needs nothing.
type blkio struct {
	once sync.Once
	dir  string // the blkio hierarchy's mountpoint; "" on v2 or without one
}

// noLimit is the rule's rate: no device comes near it.
const noLimit = "4611686018427387904"

func (b *blkio) init() {
	b.once.Do(func() {
		if cgroups.Mode() == cgroups.Unified {
			return
		}
		subs, err := cgroup1.Default()
		if err != nil {
			return
		}
		for _, s := range subs {
			if s.Name() == cgroup1.Blkio {
				b.dir = s.(interface{ Path(string) string }).Path("/")
			}
		}
	})
}

// devices lists "MAJ:MIN" of every block device now: read at each create,
// so a device added since (a loop device for a --disk cap) is covered.
func devices() []string {
	var out []string
	paths, _ := filepath.Glob("/sys/block/*/dev")
	for _, p := range paths {
		if v, err := os.ReadFile(p); err == nil {
			out = append(out, strings.TrimSpace(string(v)))
		}
	}
	return out
}

// account turns on byte counting for the sandbox cgroup at path.
func (b *blkio) account(path string) error {
	b.init()
	if b.dir == "" {
		return nil
	}
	dir := filepath.Join(b.dir, path)
	var failed []string
	for _, dev := range devices() {
		for _, f := range []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(dev+" "+noLimit), 0o644); err != nil {
				failed = append(failed, dev)
				break
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("blkio accounting on %s: devices %v refused the rule", path, failed)
	}
	return nil
}
