package boxd

import (
	"time"

	"connectrpc.com/connect"

	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// Options are a sandbox's settings at Create: every field of the API's
// CreateSandboxRequest (docs/api.md says what each does). The zero value
// of a field means boxd's default for it.
type Options struct {
	Image  string            // empty: the daemon's default image
	Name   string            // unique among the sandboxes; empty: none
	Labels map[string]string // boxd keeps them; List filters by them

	// Resources.
	Memory    string  // limit, e.g. "256m", "1g"; swap is disabled
	CPUs      float64 // CPU quota in cores, e.g. 1.5
	PIDs      int64   // most processes at once
	Disk      string  // cap of the writable layer, e.g. "2g"; "0": none
	CPUWeight uint64  // 1-10000 (cgroup cpu.weight)
	MemoryLow string  // memory protected from reclaim, at most Memory

	// The commands' environment.
	Env      []string // KEY=VALUE
	Workdir  string   // default /workspace
	User     string   // default user of commands: NAME, UID, NAME:GROUP or UID:GID
	Hostname string   // RFC 1123; default the sandbox id
	ReadOnly bool     // read-only root filesystem
	Tmpfs    []string // PATH[:SIZE] tmpfs mounts, e.g. "/tmp:128m" (default size 64m)
	Ulimits  []string // NAME=VALUE rlimits: nofile, nproc, cpu, fsize
	Runtime  string   // OCI runtime: "runc" or "gvisor"; empty: the daemon's
	Volumes  []string // NAME:/PATH[:ro] named volumes to mount
	Binds    []string // HOST-PATH:/PATH[:ro][,noexec] host directories to mount (boxd --allow-bind)
	Secrets  []string // NAME[=ENVVAR] secrets brokered at egress: the sandbox holds placeholders (docs/secrets.md)
	// Git is a public repository cloned into /workspace before create
	// returns: "URL" or "URL#REF" (https, http or git://; needs network
	// egress allowing the server and an image with git); GitDepth is the
	// clone's depth (0: all history).
	Git      string
	GitDepth uint32

	// Network: "none" (loopback only) or "egress" (out to Allow). Allow
	// alone means "egress".
	Network string
	Allow   []string // CIDR[:PORT], NAME[:PORT], *.SUFFIX, "*"
	Publish []Port   // ports of the sandbox boxd listens for on the host

	// Lifetime. For these durations and ExecTimeout, 0 is the daemon's
	// default and Never is the API's "0" (no limit, where boxd allows it).
	TTL         time.Duration // deleted this long after creation
	IdleTimeout time.Duration // no call into the sandbox this long: OnIdle happens
	OnIdle      string        // "pause" (default), "delete" or "checkpoint" (gVisor; implies AutoResume)
	// AutoResume: calls restore the sandbox from its checkpoint (or
	// resume it from a pause) first.
	AutoResume bool

	// Defaults of Exec calls that do not set their own.
	ExecTimeout time.Duration
	OutputLimit int64 // bytes of stdout+stderr kept

	// Image pull and creation.
	Pull    string        // "never" (default), "missing" or "always"
	Auth    *RegistryAuth // credentials for that pull
	Replace bool          // delete the sandbox that has Name first
	Cold    bool          // a fresh sandbox, never one from the warm pool
}

// Port is a published port: boxd listens on HostIP:HostPort and connects
// to 127.0.0.1:Port in the sandbox.
type Port struct {
	HostIP   string // empty: 127.0.0.1
	HostPort uint32 // 0: a free port, chosen by the kernel
	Port     uint32
	Protocol string // "tcp" (the default)
}

// RegistryAuth are credentials for a registry: a user name and password,
// or an identity token.
type RegistryAuth struct {
	Username, Password, IdentityToken string
}

// Never, as a duration of Options, is the API's "0": no TTL, no idle
// timeout, no exec timeout (where the daemon allows it).
const Never time.Duration = -1

// duration is d as the API's Go-duration string: "" for 0 (the daemon's
// default), "0" for Never.
func duration(d time.Duration) string {
	switch {
	case d == 0:
		return ""
	case d == Never:
		return "0"
	}
	return d.String()
}

// request is o as the API's CreateSandboxRequest.
func (o Options) request() (*boxdv1.CreateSandboxRequest, error) {
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"TTL", o.TTL}, {"IdleTimeout", o.IdleTimeout}, {"ExecTimeout", o.ExecTimeout}} {
		if d.d < 0 && d.d != Never {
			return nil, newError(connect.CodeInvalidArgument, d.name+": negative duration "+d.d.String())
		}
	}
	req := &boxdv1.CreateSandboxRequest{
		Image: o.Image, Name: o.Name, Labels: o.Labels,
		Env: o.Env, Workdir: o.Workdir, User: o.User, Hostname: o.Hostname,
		ReadOnlyRootfs: o.ReadOnly, Tmpfs: o.Tmpfs, Ulimits: o.Ulimits, Runtime: o.Runtime, Volumes: o.Volumes, Binds: o.Binds,
		Secrets: o.Secrets,
		Git:     o.Git, GitDepth: o.GitDepth,
		CpuWeight: o.CPUWeight, MemoryLow: o.MemoryLow,
		Ttl: duration(o.TTL), IdleTimeout: duration(o.IdleTimeout), OnIdle: o.OnIdle,
		ExecTimeout: duration(o.ExecTimeout), OutputLimit: o.OutputLimit,
		Pull: o.Pull, Replace: o.Replace, Cold: o.Cold,
		AutoResume: o.AutoResume,
	}
	if o.Memory != "" || o.CPUs != 0 || o.PIDs != 0 || o.Disk != "" {
		req.Limits = &boxdv1.Limits{Memory: o.Memory, Cpus: o.CPUs, Pids: o.PIDs, Disk: o.Disk}
	}
	if o.Network != "" || len(o.Allow) > 0 {
		mode := o.Network
		if mode == "" {
			mode = "egress"
		}
		req.Network = &boxdv1.NetworkRequest{Mode: mode, Allow: o.Allow}
	}
	for _, p := range o.Publish {
		req.Publish = append(req.Publish, &boxdv1.PublishedPort{HostIp: p.HostIP, HostPort: p.HostPort, Port: p.Port, Protocol: p.Protocol})
	}
	if a := o.Auth; a != nil {
		req.RegistryAuth = &boxdv1.RegistryAuth{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken}
	}
	return req, nil
}
