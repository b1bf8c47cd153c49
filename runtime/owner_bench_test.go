//go:build linux

package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/boxd-dev/boxd/agent/wire"
)

// BenchmarkExecLookup times the exec hot path's lookup of a sandbox's init
// channel (agentFor's fast path: inventory, busy check, socket stat) with
// the ownership check of a non-admin caller on (a caller in the context)
// and off (no caller, as boxd's own calls and the benchmark's unchecked
// socket). The difference is what the check adds to every exec; bench/
// run.sh reports it with the micro-benchmarks.
func BenchmarkExecLookup(b *testing.B) {
	dir := b.TempDir()
	m := &Manager{cfg: Config{StateDir: dir}, inv: newInventory(0)}
	const id = "0123456789ab"
	if err := os.MkdirAll(m.sandboxDir(id), 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.sandboxDir(id), wire.SocketName), nil, 0o600); err != nil {
		b.Fatal(err)
	}
	m.inv.showOwned(id, owned{uid: 1000})
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{"check=on", WithCaller(context.Background(), Caller{UID: 1000})},
		{"check=off", WithCaller(context.Background(), Caller{UID: 1000, Unchecked: true})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := m.agentFor(bc.ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOwnershipCheck is the check alone.
func BenchmarkOwnershipCheck(b *testing.B) {
	inv := newInventory(0)
	for i := 0; i < 1000; i++ {
		inv.showOwned(newID(), owned{uid: uint32(1000 + i%10)})
	}
	const id = "0123456789ab"
	inv.showOwned(id, owned{uid: 1000})
	ctx := WithCaller(context.Background(), Caller{UID: 1000})
	for b.Loop() {
		owner, ok := inv.visibleOwner(id)
		if !ok || !mayUse(ctx, owner) {
			b.Fatal("denied")
		}
	}
}
