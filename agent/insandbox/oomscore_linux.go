//go:build linux

package insandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent/wire"
)

// oomScore raises the init's own score to wire.CommandOOMScoreAdj around each
// fork, so the child inherits it from its first instruction: a child
// raised after the fork could fork grandchildren at the init's score
// before the raise. Lowering the score back needs no privilege as long as
// it stays at or above what runc set, which is the value restored.
type oomScore struct {
	mu      sync.Mutex
	f       *os.File // /proc/self/oom_score_adj, nil: fork as is
	own     []byte   // the init's score, written back after each fork
	command []byte
}

var initOOMScore oomScore

// setUp opens the init's score file and keeps it open, so each fork costs
// two writes and no path lookup. A score already at wire.CommandOOMScoreAdj
// (or a file that cannot be opened, as under some sandboxes' procfs)
// leaves forks as they are.
func (o *oomScore) setUp() error {
	f, err := os.OpenFile("/proc/self/oom_score_adj", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open oom_score_adj: %w", err)
	}
	b := make([]byte, 16)
	n, err := unix.Pread(int(f.Fd()), b, 0)
	if err != nil {
		f.Close()
		return fmt.Errorf("read oom_score_adj: %w", err)
	}
	own, err := strconv.Atoi(string(bytes.TrimSpace(b[:n])))
	if err != nil || own >= wire.CommandOOMScoreAdj {
		f.Close()
		return err
	}
	o.f, o.own, o.command = f, []byte(strconv.Itoa(own)), []byte(strconv.Itoa(wire.CommandOOMScoreAdj))
	return nil
}

// fork runs fork with the init's score raised. Forks are serialized here:
// another fork restoring the score early would leave this child low.
func (o *oomScore) fork(fork func() (int, error)) (int, error) {
	if o.f == nil {
		return fork()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	fd := int(o.f.Fd())
	if _, err := unix.Pwrite(fd, o.command, 0); err != nil {
		return 0, fmt.Errorf("raise oom_score_adj for the command: %w", err)
	}
	pid, err := fork()
	if _, werr := unix.Pwrite(fd, o.own, 0); werr != nil && err == nil {
		// The child runs; the init stays at the command's score, which is
		// what every process had before the init ran lower.
		return pid, nil
	}
	return pid, err
}
