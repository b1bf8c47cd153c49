//go:build linux

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/runtime"
)

// parseCheckpointMax reads --max-checkpoint-bytes; 0 refuses every
// checkpoint.
func parseCheckpointMax(cc *cli.Context) (int64, error) {
	v := cc.String("max-checkpoint-bytes")
	n, err := runtime.ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("--max-checkpoint-bytes: %w", err)
	}
	if n < 0 {
		return 0, fmt.Errorf("--max-checkpoint-bytes: %q must not be negative", v)
	}
	return n, nil
}
