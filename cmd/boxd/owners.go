//go:build linux

package main

import (
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/internal/audit"
	"github.com/boxd-dev/boxd/runtime"
)

// Flags of a boxd that several users share: who administers it, what each
// user may hold, the audit log, and how a stop drains.
func ownerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "admin-group", Usage: "group whose members, like root, see and manage every user's sandboxes and may import, pull or remove images (repeatable; default: root only)"},
		&cli.IntFlag{Name: "max-sandboxes-per-user", Usage: "most sandboxes one uid may have at once (root is not limited; unset: no per-user limit)"},
		&cli.StringFlag{Name: "max-memory-per-user", Usage: "most memory (sum of limits) one uid's sandboxes may have (root is not limited; unset: no per-user limit)"},
		&cli.StringFlag{Name: "max-disk-per-user", Usage: "most host disk one uid's sandboxes may hold: their disk caps plus the fork layers they sit on; a sandbox without a disk cap is refused (root is not limited; unset: no per-user limit)"},
		&cli.StringFlag{Name: "audit-max-size", Value: "10m", Usage: "size at which the audit log (STATE-DIR/audit.log) is rotated"},
		&cli.IntFlag{Name: "audit-keep", Value: 5, Usage: "rotated audit logs kept (audit.log.1 newest)"},
		&cli.DurationFlag{Name: "drain-timeout", Value: 30 * time.Second, Usage: "on SIGTERM, how long calls in flight (a running exec) may finish while new calls get unavailable; sandboxes keep running"},
		&cli.BoolFlag{Name: "events-argv", Usage: "record each command's arguments in its exec_started event (seen only by the sandbox's owner and admins); off, events never carry them, as arguments often hold secrets"},
		&cli.StringFlag{Name: "max-checkpoint-bytes", Value: formatSize(runtime.DefaultMaxCheckpointBytes), Usage: "most disk all checkpoints (boxctl checkpoint) may hold together; a checkpoint is refused unless the sandbox's memory limit plus disk cap fits in what is left"},
		&cli.StringFlag{Name: "bench-unchecked-socket", Hidden: true, Usage: "BENCH AID ONLY: a second socket whose calls skip the ownership check, so the benchmark measures the check's cost in one run; never set it in production"},
	}
}

// parseQuotas reads the per-user quotas: set to 0 or less is an error
// (unset means no limit), so a typo cannot silently lift or block all.
func parseQuotas(cc *cli.Context) (runtime.Quotas, error) {
	var q runtime.Quotas
	if cc.IsSet("max-sandboxes-per-user") {
		if q.MaxSandboxes = cc.Int("max-sandboxes-per-user"); q.MaxSandboxes <= 0 {
			return q, fmt.Errorf("--max-sandboxes-per-user: %d must be positive (leave it unset for no per-user limit)", q.MaxSandboxes)
		}
	}
	if cc.IsSet("max-memory-per-user") {
		v := cc.String("max-memory-per-user")
		n, err := runtime.ParseSize(v)
		if err != nil {
			return q, fmt.Errorf("--max-memory-per-user: %w", err)
		}
		if n <= 0 {
			return q, fmt.Errorf("--max-memory-per-user: %q must be positive (leave it unset for no per-user limit)", v)
		}
		q.MaxMemory = n
	}
	if cc.IsSet("max-disk-per-user") {
		v := cc.String("max-disk-per-user")
		n, err := runtime.ParseSize(v)
		if err != nil {
			return q, fmt.Errorf("--max-disk-per-user: %w", err)
		}
		if n <= 0 {
			return q, fmt.Errorf("--max-disk-per-user: %q must be positive (leave it unset for no per-user limit)", v)
		}
		q.MaxDisk = n
	}
	return q, nil
}

// adminGIDs resolves --admin-group names (or numeric gids).
func adminGIDs(cc *cli.Context) ([]int, error) {
	var out []int
	for _, g := range cc.StringSlice("admin-group") {
		if n, err := strconv.Atoi(g); err == nil && n >= 0 {
			out = append(out, n)
			continue
		}
		grp, err := user.LookupGroup(g)
		if err != nil {
			return nil, fmt.Errorf("--admin-group: %w", err)
		}
		n, err := strconv.Atoi(grp.Gid)
		if err != nil {
			return nil, fmt.Errorf("--admin-group %s: gid %q: %w", g, grp.Gid, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// openAudit opens STATE-DIR/audit.log.
func openAudit(cc *cli.Context) (*audit.Log, error) {
	size, err := runtime.ParseSize(cc.String("audit-max-size"))
	if err != nil || size <= 0 {
		return nil, fmt.Errorf("--audit-max-size: %q must be a positive size (e.g. 10m)", cc.String("audit-max-size"))
	}
	if cc.Int("audit-keep") < 1 {
		return nil, fmt.Errorf("--audit-keep: %d must be at least 1", cc.Int("audit-keep"))
	}
	if cc.Duration("drain-timeout") < 0 {
		return nil, fmt.Errorf("--drain-timeout: %s must not be negative", cc.Duration("drain-timeout"))
	}
	return audit.Open(filepath.Clean(cc.String("state-dir")), size, cc.Int("audit-keep"))
}
