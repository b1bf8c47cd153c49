// Command escape is what hostile code in a sandbox runs to get out: each
// probe makes one real attempt with the raw syscall and prints one line,
//
//	NAME RESULT
//
// where RESULT is "ok" when the attempt worked, the errno's name (EPERM,
// EACCES, ...) when it was refused, or a probe-specific word. The e2e
// escape suite builds it statically, copies it into a sandbox and asserts
// the refusal it expects for each line, as root and as an unprivileged user.
//
//	escape probe     run every probe
//	escape whoami    print the effective uid (the setuid probe)
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: escape probe|whoami")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "whoami":
		fmt.Println(unix.Geteuid())
	case "probe":
		for _, p := range probes {
			fmt.Println(p.name, p.run())
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

type probe struct {
	name string
	run  func() string
}

// result names err's errno, or "ok".
func result(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return "error:" + strings.ReplaceAll(err.Error(), " ", "_")
}

func raw(trap uintptr, a ...uintptr) string {
	var args [6]uintptr
	copy(args[:], a)
	r, _, errno := unix.Syscall6(trap, args[0], args[1], args[2], args[3], args[4], args[5])
	if errno != 0 {
		return unix.ErrnoName(errno)
	}
	// Something came back: close it if it looks like a descriptor.
	if trap != unix.SYS_PTRACE && int(r) > 2 {
		unix.Close(int(r))
	}
	return "ok"
}

func openWrite(path string) string {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return result(err)
}

var probes = []probe{
	{"mount", func() string { return result(unix.Mount("none", "/tmp", "tmpfs", 0, "")) }},
	{"mount-proc", func() string {
		os.MkdirAll("/tmp/escape-proc", 0o755)
		return result(unix.Mount("proc", "/tmp/escape-proc", "proc", 0, ""))
	}},
	{"unshare-user", func() string { return result(unix.Unshare(unix.CLONE_NEWUSER)) }},
	{"unshare-mount", func() string { return result(unix.Unshare(unix.CLONE_NEWNS)) }},
	{"clone-newuser", func() string {
		// A new user namespace by clone (what `unshare -U` falls back to).
		pid, err := syscall.ForkExec("/proc/self/exe", []string{"escape", "whoami"}, &syscall.ProcAttr{
			Sys: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER},
		})
		if err == nil {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
		return result(err)
	}},
	{"setns", func() string {
		fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "open:" + result(err)
		}
		defer unix.Close(fd)
		return result(unix.Setns(fd, unix.CLONE_NEWNET))
	}},
	{"ptrace-init", func() string { return raw(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 1) }},
	{"keyctl", func() string {
		_, err := unix.KeyctlJoinSessionKeyring("escape")
		return result(err)
	}},
	{"add_key", func() string {
		_, err := unix.AddKey("user", "escape", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return result(err)
	}},
	{"bpf", func() string {
		// BPF_MAP_CREATE of a one-entry array.
		attr := [5]uint32{unix.BPF_MAP_TYPE_ARRAY, 4, 4, 1, 0}
		return raw(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr[0])), unsafe.Sizeof(attr))
	}},
	{"perf_event_open", func() string {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
		attr.Size = uint32(unsafe.Sizeof(attr))
		_, err := unix.PerfEventOpen(&attr, 0, -1, -1, 0)
		return result(err)
	}},
	{"io_uring_setup", func() string {
		var params [120]byte
		return raw(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])))
	}},
	{"userfaultfd", func() string { return raw(unix.SYS_USERFAULTFD, unix.O_CLOEXEC) }},
	{"open_by_handle_at", func() string {
		var h [8 + 128]byte
		return raw(unix.SYS_OPEN_BY_HANDLE_AT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&h[0])), unix.O_RDONLY)
	}},
	{"kexec_load", func() string { return raw(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0) }},
	{"finit_module", func() string {
		fd, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "open:" + result(err)
		}
		defer unix.Close(fd)
		return result(unix.FinitModule(fd, "", 0))
	}},
	{"init_module", func() string {
		img := []byte("\x7fELF")
		return result(unix.InitModule(img, ""))
	}},
	{"af_alg", func() string { return socket(unix.AF_ALG, unix.SOCK_SEQPACKET, 0) }},
	{"raw-socket", func() string { return socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP) }},
	{"packet-socket", func() string { return socket(unix.AF_PACKET, unix.SOCK_RAW, 0) }},
	{"mknod-block", func() string {
		err := unix.Mknod("/tmp/escape-sda", unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0)))
		if err == nil {
			os.Remove("/tmp/escape-sda")
		}
		return result(err)
	}},
	{"mknod-char-mem", func() string {
		err := unix.Mknod("/tmp/escape-mem", unix.S_IFCHR|0o600, int(unix.Mkdev(1, 1)))
		if err == nil {
			os.Remove("/tmp/escape-mem")
		}
		return result(err)
	}},
	{"sysrq-trigger", func() string { return openWrite("/proc/sysrq-trigger") }},
	{"proc-sys-write", func() string { return openWrite("/proc/sys/kernel/core_pattern") }},
	{"sys-write", func() string { return openWrite("/sys/kernel/profiling") }},
	{"kcore", func() string {
		// Masked: /dev/null is bound over it, so it reads as empty.
		b := make([]byte, 64)
		fd, err := unix.Open("/proc/kcore", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return result(err)
		}
		defer unix.Close(fd)
		n, err := unix.Read(fd, b)
		if err != nil {
			return result(err)
		}
		if n == 0 {
			return "empty"
		}
		return "read:" + strconv.Itoa(n)
	}},
	{"proc-keys", func() string {
		b, err := os.ReadFile("/proc/keys")
		if err != nil {
			return result(err)
		}
		if len(b) == 0 {
			return "empty"
		}
		return "read:" + strconv.Itoa(len(b))
	}},
	{"proc-acpi", func() string {
		ents, err := os.ReadDir("/proc/acpi")
		if err != nil {
			return result(err)
		}
		if len(ents) == 0 {
			return "empty"
		}
		return "entries:" + strconv.Itoa(len(ents))
	}},
	{"init-fds", func() string {
		// The names may be listed (the directory belongs to sandbox root),
		// but no descriptor of the non-dumpable init may be followed.
		ents, err := os.ReadDir("/proc/1/fd")
		if err != nil {
			return result(err)
		}
		res := "none"
		for _, e := range ents {
			p := "/proc/1/fd/" + e.Name()
			if _, err := os.Readlink(p); err == nil {
				return "readlink:" + e.Name()
			}
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
			if err == nil {
				unix.Close(fd)
				return "open:" + e.Name()
			}
			res = result(err)
		}
		return res
	}},
	{"init-root", func() string {
		_, err := os.Readlink("/proc/1/root")
		return result(err)
	}},
	{"init-cwd", func() string {
		_, err := os.Readlink("/proc/1/cwd")
		return result(err)
	}},
	// The CVE-2024-21626 class: a descriptor left open by the runtime or
	// the init that leads to a host directory. Every descriptor this
	// process got must be a pipe, socket, terminal or device node, never a
	// directory; and ".." from any of them must not leave the sandbox.
	{"self-fds", func() string {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return result(err)
		}
		for _, e := range ents {
			p := filepath.Join("/proc/self/fd", e.Name())
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				continue // the ReadDir's own descriptor, closed by now
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				target, _ := os.Readlink(p)
				return "dir-fd:" + e.Name() + "=" + target
			}
		}
		return "clean"
	}},
	{"chroot-escape", func() string {
		// chroot is allowed (CAP_SYS_CHROOT); the classic escape is a
		// chroot into a subdirectory and many ".." from there.
		os.MkdirAll("/tmp/escape-jail", 0o755)
		if err := unix.Chroot("/tmp/escape-jail"); err != nil {
			return "chroot:" + result(err)
		}
		for i := 0; i < 64; i++ {
			unix.Chdir("..")
		}
		if err := unix.Chroot("."); err != nil {
			return "chroot2:" + result(err)
		}
		// Only the sandbox's own root is reachable: the init is there.
		if _, err := os.Stat("/.boxd/init"); err == nil {
			return "sandbox-root"
		}
		return "elsewhere"
	}},
}

// atFDCWD is AT_FDCWD as the syscall sees it.
var atFDCWD = int64(unix.AT_FDCWD)

func socket(domain, typ, proto int) string {
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
	if err == nil {
		unix.Close(fd)
	}
	return result(err)
}
