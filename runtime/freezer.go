//go:build linux

// Room: resources. The cgroup freezer, v1 and v2.

package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
)

// freezer pauses and resumes a sandbox by writing its cgroup's freezer
// (v1 freezer.state, v2 cgroup.freeze) directly: about a millisecond,
// where containerd's task Pause runs a runc process (tens of ms here, as
// for limit updates: see setLimits). The frozen state lives in the kernel,
// so it survives a boxd restart; boxd reads it back from the same file.
// containerd's own task status does not see it (it reports running): boxd
// reports "paused" from the cgroup, and thaws a sandbox before killing it.
type freezer struct {
	once sync.Once
	v2   bool
	root string // v1: the freezer hierarchy's mountpoint; v2: the unified one
	err  error
}

func (f *freezer) init() error {
	f.once.Do(func() {
		if cgroups.Mode() == cgroups.Unified {
			f.v2, f.root = true, unifiedMountpoint
			return
		}
		subs, err := cgroup1.Default()
		if err != nil {
			f.err = fmt.Errorf("cgroup v1 hierarchy: %w", err)
			return
		}
		for _, s := range subs {
			if s.Name() == cgroup1.Freezer {
				f.root = s.(interface{ Path(string) string }).Path("/")
				return
			}
		}
		f.err = errors.New("no freezer controller in the cgroup v1 hierarchy")
	})
	return f.err
}

// freezeTimeout bounds how long a freeze may take: a task in an
// uninterruptible sleep (D state) holds it in FREEZING.
const freezeTimeout = 5 * time.Second

// set freezes or thaws the cgroup at path (the spec's cgroupsPath) and
// waits until the kernel reports it done. A freeze that does not complete
// in freezeTimeout is undone.
func (f *freezer) set(path string, frozen bool) error {
	if err := f.init(); err != nil {
		return err
	}
	dir := filepath.Join(f.root, path)
	file, want := "freezer.state", "THAWED"
	if f.v2 {
		file, want = "cgroup.freeze", "0"
		if frozen {
			want = "1"
		}
	} else if frozen {
		want = "FROZEN"
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(want), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", path, err)
	}
	deadline := time.Now().Add(freezeTimeout)
	delay := 50 * time.Microsecond
	for {
		got, err := f.frozen(path)
		if err != nil {
			return err
		}
		if got == frozen {
			return nil
		}
		if time.Now().After(deadline) {
			if frozen {
				_ = f.set(path, false)
			}
			return fmt.Errorf("cgroup %s: the freezer did not settle within %s (a process in uninterruptible sleep?)", path, freezeTimeout)
		}
		if !f.v2 {
			// v1 retries the write: a task that forked meanwhile can
			// leave the group in FREEZING.
			_ = os.WriteFile(filepath.Join(dir, file), []byte(want), 0o644)
		}
		time.Sleep(delay)
		delay = min(delay*2, 5*time.Millisecond)
	}
}

// frozen reports whether the cgroup at path is wholly frozen. A cgroup
// that does not exist (no task) is not frozen.
func (f *freezer) frozen(path string) (bool, error) {
	if err := f.init(); err != nil {
		return false, err
	}
	dir := filepath.Join(f.root, path)
	if f.v2 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("cgroup %s: %w", path, err)
		}
		return parseFrozenV2(string(b)), nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cgroup %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)) == "FROZEN", nil
}

// populated reports whether the cgroup at path exists and holds a
// process (v1: the freezer group's cgroup.procs is not empty; v2:
// cgroup.events says populated 1).
func (f *freezer) populated(path string) (bool, error) {
	if err := f.init(); err != nil {
		return false, err
	}
	dir := filepath.Join(f.root, path)
	name := "cgroup.procs"
	if f.v2 {
		name = "cgroup.events"
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cgroup %s: %w", path, err)
	}
	if f.v2 {
		return parseKeyV2(string(b), "populated"), nil
	}
	return len(strings.TrimSpace(string(b))) > 0, nil
}

// parseFrozenV2 reads the "frozen" key of a v2 cgroup.events file.
func parseFrozenV2(events string) bool { return parseKeyV2(events, "frozen") }

// parseKeyV2 reports whether key is 1 in a v2 cgroup.events file.
func parseKeyV2(events, key string) bool {
	for _, line := range strings.Split(events, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			return strings.TrimSpace(v) == "1"
		}
	}
	return false
}
