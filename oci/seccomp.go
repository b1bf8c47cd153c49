package oci

import (
	"context"
	"slices"

	"github.com/containerd/containerd/v2/core/containers"
	coci "github.com/containerd/containerd/v2/pkg/oci"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// DeniedSyscalls are refused with EPERM whatever the capability set, on top
// of containerd's default profile. containerd (like Docker) opens a syscall
// when the bounding set holds the capability that guards it, so a later
// loosening of the capability set would silently open these too; boxd
// closes them by name instead. Each is something untrusted code has no use
// for in a sandbox and that has been a route to kernel bugs or to the host.
// docs/security.md says why per group.
var DeniedSyscalls = []string{
	// New namespaces and joining others': the sandbox's namespaces are
	// fixed by boxd (clone with namespace flags is refused by containerd's
	// argument mask; clone3 returns ENOSYS).
	"unshare", "setns",
	// Mounts, old and new API.
	"mount", "umount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick",
	"move_mount", "open_tree", "mount_setattr",
	// io_uring: a second syscall surface that seccomp cannot filter, and the
	// source of many kernel privilege escalations.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// userfaultfd: stalls kernel copies at will, the classic race widener.
	"userfaultfd",
	// perf and eBPF: kernel attack surface, and information about the host.
	"perf_event_open", "bpf",
	// The kernel keyring is not namespaced.
	"keyctl", "add_key", "request_key",
	// Replacing or extending the kernel.
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "reboot",
	// File handles bypass path-based checks (the "shocker" escape).
	"open_by_handle_at", "name_to_handle_at",
	// Host-wide state: swap, accounting, quotas, the kernel log, the clock.
	"swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "settimeofday",
	"clock_settime", "clock_adjtime", "stime",
	// Port I/O and other relics.
	"iopl", "ioperm", "uselib", "lookup_dcookie", "nfsservctl", "vhangup",
	"get_kernel_syms", "query_module",
}

// withDeniedSyscalls drops DeniedSyscalls from every allow rule of the
// profile already in s and adds one rule that refuses them with EPERM. It
// must come after the profile is set.
func withDeniedSyscalls(_ context.Context, _ coci.Client, _ *containers.Container, s *coci.Spec) error {
	if s.Linux == nil || s.Linux.Seccomp == nil {
		return nil // Spec refuses a spec without a profile afterwards.
	}
	DenySyscalls(s.Linux.Seccomp, DeniedSyscalls)
	return nil
}

// DenySyscalls removes names from sc's allow rules and appends a rule that
// returns EPERM for them.
func DenySyscalls(sc *specs.LinuxSeccomp, names []string) {
	rules := sc.Syscalls[:0]
	for _, r := range sc.Syscalls {
		if r.Action == specs.ActAllow {
			r.Names = slices.DeleteFunc(slices.Clone(r.Names), func(n string) bool { return slices.Contains(names, n) })
			if len(r.Names) == 0 {
				continue
			}
		}
		rules = append(rules, r)
	}
	eperm := uint(unix.EPERM)
	sc.Syscalls = append(rules, specs.LinuxSyscall{
		Names:    slices.Clone(names),
		Action:   specs.ActErrno,
		ErrnoRet: &eperm,
	})
}
