//go:build linux

package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// logBudget is how much the init writes to its log in one life. The log is
// a file on the host's disk, written by the shim outside every limit of the
// sandbox, and each failing operation adds a line: without a budget, a
// caller looping on failing calls (or anything that makes calls fail) would
// fill the host's disk. boxd also trims the file to its tail; this keeps
// one init from writing more than the trim allows between two passes.
const logBudget = 64 << 10

// budgetLog writes timestamped lines to w until budget bytes are used, then
// one line saying so, then nothing.
type budgetLog struct {
	mu     sync.Mutex
	w      io.Writer
	left   int
	cutOff bool
}

func newBudgetLog(w io.Writer, budget int) *budgetLog {
	return &budgetLog{w: w, left: budget}
}

func (l *budgetLog) logf(format string, args ...any) {
	line := fmt.Sprintf("%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339Nano)}, args...)...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cutOff {
		return
	}
	if len(line) > l.left {
		l.cutOff = true
		fmt.Fprintf(l.w, "%s boxd-init: log budget of %d bytes used up; further lines are dropped\n",
			time.Now().UTC().Format(time.RFC3339Nano), logBudget)
		return
	}
	l.left -= len(line)
	_, _ = io.WriteString(l.w, line)
}
