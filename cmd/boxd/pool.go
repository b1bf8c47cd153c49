//go:build linux

package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/boxd-dev/boxd/runtime"
)

// defaultPoolSize is the warm pool of the default image a boxd keeps
// when --warm-pool is not given: two members serve a create (or a
// `boxctl run`) at once while the next one starts, for the cost of two
// idle inits (a few MiB each) and two uid blocks.
const defaultPoolSize = 2

func poolFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "warm-pool", Value: cli.NewStringSlice(strconv.Itoa(defaultPoolSize)),
		Usage: "idle sandboxes kept started for fast creates: IMAGE=N per image (repeatable), or N for the default image; 0 turns the default image's pool off"}
}

// parsePools reads --warm-pool. The default's size shrinks to fit
// --max-sandboxes; sizes given explicitly that do not fit are an error.
func parsePools(cc *cli.Context, maxSandboxes int) ([]runtime.PoolSize, error) {
	var out []runtime.PoolSize
	seen := map[string]bool{}
	total := 0
	for _, v := range cc.StringSlice("warm-pool") {
		image, size, ok := strings.Cut(v, "=")
		if !ok {
			image, size = "", v
		}
		n, err := strconv.Atoi(strings.TrimSpace(size))
		if err != nil || n < 0 || n > runtime.MaxPoolSize {
			return nil, fmt.Errorf("--warm-pool: %q: want IMAGE=N or N, N from 0 to %d", v, runtime.MaxPoolSize)
		}
		image = strings.TrimSpace(image)
		if ok && image == "" {
			return nil, fmt.Errorf("--warm-pool: %q names no image", v)
		}
		if seen[image] {
			return nil, fmt.Errorf("--warm-pool: %q: the image's pool is sized twice", v)
		}
		seen[image] = true
		total += n
		out = append(out, runtime.PoolSize{Image: image, Size: n})
	}
	if maxSandboxes > 0 && total > maxSandboxes {
		if !cc.IsSet("warm-pool") {
			return []runtime.PoolSize{{Size: maxSandboxes}}, nil
		}
		return nil, fmt.Errorf("--warm-pool: %d members would not fit under --max-sandboxes %d", total, maxSandboxes)
	}
	return out, nil
}
