package boxd

import (
	"context"
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// ForkOptions are what Fork changes in the forks: every field of the
// API's ForkSandboxRequest. The zero value of a field keeps the source's
// value (TTL: the daemon's default).
type ForkOptions struct {
	Count  int               // how many forks; 0: one per name, or 1 (at most 64)
	Names  []string          // optional: one unique name per fork
	Memory string            // limit, e.g. "256m"
	CPUs   float64           // CPU quota in cores
	PIDs   int64             // most processes at once
	Env    []string          // KEY=VALUE, added to the source's environment
	Labels map[string]string // added to the source's labels
	// Workdir is the forks' working directory.
	Workdir string
	TTL     time.Duration
	// The source's named volumes are mounted read-only in each fork,
	// unless CloneVolumes (each fork gets a clone of each: a new volume
	// of the caller's named VOLUME-FORKID, charged to its disk quota) or
	// ShareVolumes (mounted as the source mounts them; only volumes
	// created shared).
	CloneVolumes bool
	ShareVolumes bool
	// WithProcesses forks the running processes and their memory too,
	// from a checkpoint of the source (gVisor; see docs/checkpoint.md:
	// refused with failed_precondition where the runtime cannot).
	WithProcesses bool
}

// request is o as the API's ForkSandboxRequest of sandbox id.
func (o ForkOptions) request(id string) *boxdv1.ForkSandboxRequest {
	req := &boxdv1.ForkSandboxRequest{
		SandboxId: id, Count: uint32(max(o.Count, 0)), Names: o.Names, Env: o.Env, Workdir: o.Workdir,
		Labels: o.Labels, Ttl: duration(o.TTL), CloneVolumes: o.CloneVolumes, ShareVolumes: o.ShareVolumes,
		WithProcesses: o.WithProcesses,
	}
	if o.Memory != "" || o.CPUs != 0 || o.PIDs != 0 {
		req.Limits = &boxdv1.Limits{Memory: o.Memory, Cpus: o.CPUs, Pids: o.PIDs}
	}
	return req
}

// Fork makes new sandboxes whose files start as a copy of this one's; each
// runs a fresh init. Close each fork (or Delete it) when done.
func (s *Sandbox) Fork(ctx context.Context, o ForkOptions) ([]*Sandbox, error) {
	res, err := s.c.api.Sandboxes.ForkSandbox(ctx, connect.NewRequest(o.request(s.ID)))
	if err != nil {
		return nil, wrap(err)
	}
	forks := make([]*Sandbox, 0, len(res.Msg.GetSandboxes()))
	for _, info := range res.Msg.GetSandboxes() {
		forks = append(forks, s.c.sandbox(info))
	}
	return forks, nil
}
