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
		Usage: "idle sandboxes kept started for fast creates: IMAGE=N per image (repeatable), or N for the default image; N@gvisor for gVisor members (runc otherwise), N@egress for runc members that serve --network egress creates; 0 turns the default image's pool off"}
}

// parsePools reads --warm-pool: [IMAGE=]N[@RUNTIME|@egress]. The runtime
// goes after the size, where no image reference puts an "@" (a digest's
// is in the image part); "egress" there is a pool of runc members made
// ready for network egress. The default's size shrinks to fit --max-sandboxes;
// sizes given explicitly that do not fit are an error.
func parsePools(cc *cli.Context, maxSandboxes int) ([]runtime.PoolSize, error) {
	var out []runtime.PoolSize
	seen := map[string]bool{}
	total := 0
	for _, v := range cc.StringSlice("warm-pool") {
		image, size, ok := strings.Cut(v, "=")
		if !ok {
			image, size = "", v
		}
		size, rt, hasRT := strings.Cut(size, "@")
		n, err := strconv.Atoi(strings.TrimSpace(size))
		if err != nil || n < 0 || n > runtime.MaxPoolSize {
			return nil, fmt.Errorf("--warm-pool: %q: want IMAGE=N, N, IMAGE=N@RUNTIME or N@RUNTIME, N from 0 to %d", v, runtime.MaxPoolSize)
		}
		rt = strings.TrimSpace(rt)
		var netMode string
		if rt == "egress" {
			rt, netMode = runtime.RuntimeRunc, "egress"
		} else if hasRT {
			if got, err := runtime.ParseRuntime("--warm-pool", rt); err != nil || got == "" {
				return nil, fmt.Errorf("--warm-pool: %q: unknown runtime %q after the size: runc or gvisor", v, rt)
			}
		}
		if rt == "" {
			rt = runtime.RuntimeRunc
		}
		image = strings.TrimSpace(image)
		if ok && image == "" {
			return nil, fmt.Errorf("--warm-pool: %q names no image", v)
		}
		if seen[image+"@"+rt+netMode] {
			return nil, fmt.Errorf("--warm-pool: %q: the image's %s pool is sized twice", v, strings.TrimSpace(rt+" "+netMode))
		}
		seen[image+"@"+rt+netMode] = true
		total += n
		out = append(out, runtime.PoolSize{Image: image, Runtime: rt, Network: netMode, Size: n})
	}
	if maxSandboxes > 0 && total > maxSandboxes {
		if !cc.IsSet("warm-pool") {
			return []runtime.PoolSize{{Runtime: runtime.RuntimeRunc, Size: maxSandboxes}}, nil
		}
		return nil, fmt.Errorf("--warm-pool: %d members would not fit under --max-sandboxes %d", total, maxSandboxes)
	}
	return out, nil
}

// checkPoolRuntimes stops boxd at start when a gVisor pool is sized but
// gVisor was not found (why says why), rather than failing every refill.
func checkPoolRuntimes(pools []runtime.PoolSize, gv *runtime.Gvisor, why string) error {
	for _, p := range pools {
		if p.Runtime == runtime.RuntimeGvisor && p.Size > 0 && gv == nil {
			name := p.Image
			if name == "" {
				name = "the default image"
			}
			return fmt.Errorf("--warm-pool: a gvisor pool of %s, but gVisor is not available (%s; see --runsc)", name, why)
		}
	}
	return nil
}
