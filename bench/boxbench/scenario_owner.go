//go:build linux

package main

// Scenario 12: what the ownership check costs an exec. boxd serves a
// second socket with the check off (--bench-unchecked-socket, a flag that
// exists only for this measurement); one non-root caller (uid/gid 65534,
// "nobody", which is neither root nor in an admin group, so the check
// runs in full) execs `true` in its own sandbox through both sockets,
// interleaved, against the same daemon in the same run. The difference of
// the medians is the check's cost (target: at most 0.1 ms).

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/boxd-dev/boxd/internal/testenv"
	"github.com/boxd-dev/boxd/rpc/apiwire"
	"github.com/boxd-dev/boxd/rpc/gen/boxd/v1/boxdv1connect"
)

// benchUID is the non-admin caller: nobody/nogroup on Debian.
const benchUID = 65534

// uncheckedSocket is where boxd serves calls without the check.
func (e *env) uncheckedSocket() string { return filepath.Join(e.dir, "run", "unchecked.sock") }

func apiAsNobody(sock string) boxdAPI {
	tr := apiwire.Transport(sock)
	tr.DialContext = testenv.DialAs(benchUID, benchUID, nil, sock)
	return boxdAPI{c: boxdv1connect.NewSandboxServiceClient(&http.Client{Transport: tr}, "http://boxd")}
}

func scenarioOwner(ctx context.Context, e *env, cfg *config) (*latency, error) {
	checked, unchecked := apiAsNobody(e.sock), apiAsNobody(e.uncheckedSocket())
	sb, err := checked.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("create as uid %d: %w", benchUID, err)
	}
	defer checked.remove(context.WithoutCancel(ctx), sb)
	on := apiExecPeer(checked, sb)
	on.name = "boxd exec, ownership check on"
	off := apiExecPeer(unchecked, sb)
	off.name = "boxd exec, check off (bench socket)"
	l := measure(ctx, "exec `true` by a non-admin caller in its own sandbox", cfg.warm*3, cfg.apiN*2, []peer{on, off})
	d := quantile(l.samples[on.name], 0.5) - quantile(l.samples[off.name], 0.5)
	l.scenario += fmt.Sprintf(": the check costs %+.3f ms (difference of medians)", float64(d)/float64(time.Millisecond))
	logf("ownership check: median on %v, off %v, difference %v", quantile(l.samples[on.name], 0.5), quantile(l.samples[off.name], 0.5), d)
	return l, ctx.Err()
}
