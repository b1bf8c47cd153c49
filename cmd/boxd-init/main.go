//go:build linux

// Command boxd-init is PID 1 of every boxd sandbox. boxd bind-mounts it
// read-only at agent.InitPath; it reaps orphans and serves the agent socket
// through which boxd runs commands and moves files inside the sandbox.
//
// Environment (stripped from the environment commands see):
//
//	BOXD_WORKDIR      default working directory, created if missing (/workspace)
//	BOXD_CHANNEL_DIR  directory of the agent socket (agent.ChannelDir)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"golang.org/x/sys/unix"

	"github.com/boxd-dev/boxd/agent"
)

func main() {
	// The init idles most of its life in every sandbox: trade a little CPU
	// for a small heap, and keep few threads.
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(64 << 20)
	if runtime.GOMAXPROCS(0) > 2 {
		runtime.GOMAXPROCS(2)
	}
	// containerd's seccomp profile allows ptrace on this kernel: a
	// non-dumpable init cannot be attached to or have its memory read by
	// code in the sandbox, whatever its uid. Commands are not affected
	// (execve resets the flag).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		logf("prctl(PR_SET_DUMPABLE): %v", err)
	}

	cfg := agent.InitConfig{
		Workdir:    envOr("BOXD_WORKDIR", "/workspace"),
		SocketPath: filepath.Join(envOr("BOXD_CHANNEL_DIR", agent.ChannelDir), agent.SocketName),
		BaseEnv:    agent.InitEnv(os.Environ()),
		Logf:       logf,
	}
	if err := agent.RunInit(cfg); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// logf writes to stderr, which the runtime collects as the sandbox's log.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339Nano)}, args...)...)
}
