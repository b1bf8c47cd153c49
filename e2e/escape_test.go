//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/boxd-dev/boxd/internal/testenv"
	boxdv1 "github.com/boxd-dev/boxd/rpc/gen/boxd/v1"
)

// escapeHelper builds testdata/escape statically and copies it into the
// sandbox as /workspace/escape (on the writable layer, which is not mounted
// nosuid, so the setuid probe means something).
func escapeHelper(t *testing.T, id string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "escape")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "./e2e/testdata/escape")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build escape helper: %v\n%s", err, out)
	}
	if _, err := boxctl(nil, "cp", bin, id+":/workspace/escape"); err != nil {
		t.Fatal(err)
	}
	sh(t, id, "chmod 755 /workspace/escape")
}

// escapeExpect is the refusal each probe must meet, as root in the sandbox
// and as an unprivileged user. Several results are acceptable where the
// kernel's check order decides which refusal comes first (a read-only mount
// against a file the user may not write).
var escapeExpect = map[string]struct{ root, user []string }{
	"mount":             {[]string{"EPERM"}, []string{"EPERM"}},
	"mount-proc":        {[]string{"EPERM"}, []string{"EPERM"}},
	"unshare-user":      {[]string{"EPERM"}, []string{"EPERM"}},
	"unshare-mount":     {[]string{"EPERM"}, []string{"EPERM"}},
	"clone-newuser":     {[]string{"EPERM"}, []string{"EPERM"}},
	"setns":             {[]string{"EPERM"}, []string{"EPERM"}},
	"ptrace-init":       {[]string{"EPERM"}, []string{"EPERM"}},
	"keyctl":            {[]string{"EPERM"}, []string{"EPERM"}},
	"add_key":           {[]string{"EPERM"}, []string{"EPERM"}},
	"bpf":               {[]string{"EPERM"}, []string{"EPERM"}},
	"perf_event_open":   {[]string{"EPERM"}, []string{"EPERM"}},
	"io_uring_setup":    {[]string{"EPERM"}, []string{"EPERM"}},
	"userfaultfd":       {[]string{"EPERM"}, []string{"EPERM"}},
	"open_by_handle_at": {[]string{"EPERM"}, []string{"EPERM"}},
	"kexec_load":        {[]string{"EPERM"}, []string{"EPERM"}},
	"finit_module":      {[]string{"EPERM"}, []string{"EPERM"}},
	"init_module":       {[]string{"EPERM"}, []string{"EPERM"}},
	"af_alg":            {[]string{"EPERM"}, []string{"EPERM"}},
	"raw-socket":        {[]string{"EPERM"}, []string{"EPERM"}},
	"packet-socket":     {[]string{"EPERM"}, []string{"EPERM"}},
	"mknod-block":       {[]string{"EPERM"}, []string{"EPERM"}},
	"mknod-char-mem":    {[]string{"EPERM"}, []string{"EPERM"}},
	"sysrq-trigger":     {[]string{"EROFS", "EACCES"}, []string{"EROFS", "EACCES"}},
	"proc-sys-write":    {[]string{"EROFS", "EACCES"}, []string{"EROFS", "EACCES"}},
	"sys-write":         {[]string{"EROFS", "EACCES"}, []string{"EROFS", "EACCES"}},
	"kcore":             {[]string{"empty"}, []string{"empty", "EACCES"}},
	"proc-keys":         {[]string{"empty"}, []string{"empty"}},
	"proc-acpi":         {[]string{"empty", "ENOENT"}, []string{"empty", "ENOENT"}},
	"init-fds":          {[]string{"EACCES"}, []string{"EACCES"}}, // readlink and open of each descriptor
	"init-root":         {[]string{"EACCES"}, []string{"EACCES"}},
	"init-cwd":          {[]string{"EACCES"}, []string{"EACCES"}},
	"self-fds":          {[]string{"clean"}, []string{"clean"}},
	// Root may chroot (CAP_SYS_CHROOT) and climb back out of its jail, but
	// only to the sandbox's own root.
	"chroot-escape": {[]string{"sandbox-root"}, []string{"chroot:EPERM"}},
}

// escapeHostPaths are the probes' targets that some kernels lack (this CI
// machine's has no /proc/kcore or /proc/sysrq-trigger): where the host has
// no such file, the sandbox has none either and ENOENT is the only right
// answer.
var escapeHostPaths = map[string]string{
	"sysrq-trigger": "/proc/sysrq-trigger",
	"kcore":         "/proc/kcore",
	"sys-write":     "/sys/kernel/profiling",
}

// escapeExpectGvisor is where a gVisor sandbox's refusal differs from a
// runc sandbox's (escapeExpect), per probe. The system-call probes are
// refused with EPERM alike: runsc applies the spec's seccomp profile in
// its Sentry (runsc --oci-seccomp, gvisor.Flags), before gVisor's own
// checks would.
var escapeExpectGvisor = map[string]struct{ root, user []string }{
	// gVisor's /proc/sysrq-trigger is the Sentry's own write-only file
	// that discards what it is given (pkg/sentry/fsimpl/proc/tasks.go:
	// newStaticFile("")): root's write succeeds and reaches nothing of the
	// host's; a user has no write permission.
	"sysrq-trigger": {[]string{"ok"}, []string{"EACCES"}},
	// The Sentry's /proc/sys and /sys have no such writable files: the
	// write fails before any permission question.
	"proc-sys-write": {[]string{"ENOENT"}, []string{"ENOENT"}},
	"sys-write":      {[]string{"ENOENT"}, []string{"ENOENT"}},
	// The Sentry has no /proc/kcore, /proc/keys or /proc/acpi at all.
	"kcore":     {[]string{"ENOENT"}, []string{"ENOENT"}},
	"proc-keys": {[]string{"ENOENT"}, []string{"ENOENT"}},
	"proc-acpi": {[]string{"ENOENT"}, []string{"ENOENT"}},
	// The Sentry's VFS keeps ".." at the jail's root, so root's climb out
	// of the chroot ends inside the jail ("elsewhere": not even the
	// sandbox's root); the host's root is not in the Sentry's mount tree
	// at all.
	"chroot-escape": {[]string{"elsewhere", "sandbox-root"}, []string{"chroot:EPERM"}},
}

// TestEscapeSuite makes each attempt for real from inside a sandbox, as
// root and as an unprivileged user, under runc and under gVisor, and
// asserts its refusal.
func TestEscapeSuite(t *testing.T) {
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) { escapeSuite(t, rt) })
	}
}

func escapeSuite(t *testing.T, runtime string) {
	id := newSandbox(t, "--memory", "128m", "--pids", "64", "--runtime", runtime)
	escapeHelper(t, id)
	for _, who := range []string{"root", "sandbox"} {
		t.Run(who, func(t *testing.T) {
			out, stderr, code := boxctlRun("exec", "-u", who, "--timeout", "30s", id, "--", "/workspace/escape", "probe")
			if code != 0 {
				t.Fatalf("escape probe as %s: exit %d, stderr %q, stdout %q", who, code, stderr, out)
			}
			seen := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				name, got, _ := strings.Cut(line, " ")
				want, ok := escapeExpect[name]
				if !ok {
					t.Errorf("probe %q has no expectation (result %q)", name, got)
					continue
				}
				seen[name] = true
				gv, gvDiffers := escapeExpectGvisor[name]
				if runtime == "gvisor" && gvDiffers {
					want = gv
				}
				accept := want.root
				if who != "root" {
					accept = want.user
				}
				if p, ok := escapeHostPaths[name]; ok && !(runtime == "gvisor" && gvDiffers) {
					if _, err := os.Stat(p); os.IsNotExist(err) {
						accept = []string{"ENOENT"}
					}
				}
				if !slices.Contains(accept, got) {
					t.Errorf("%s as %s: got %q, want one of %q", name, who, got, accept)
				}
			}
			for name := range escapeExpect {
				if !seen[name] {
					t.Errorf("probe %s did not run", name)
				}
			}
		})
	}
}

// TestSetuidGainsNothing: a setuid-root binary made by sandbox root runs
// with the caller's uid (no_new_privs), so an unprivileged user in the
// sandbox cannot become root there through one. Under runc and gVisor
// (whose Sentry honours no_new_privs on its own execve).
func TestSetuidGainsNothing(t *testing.T) {
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) { setuidGainsNothing(t, rt) })
	}
}

func setuidGainsNothing(t *testing.T, runtime string) {
	id := newSandbox(t, "--runtime", runtime)
	escapeHelper(t, id)
	sh(t, id, "cp /workspace/escape /workspace/suid && chown 0:0 /workspace/suid && chmod 4755 /workspace/suid")
	// The bit is really set and the filesystem honours it (not nosuid), so a
	// kernel without no_new_privs would raise the euid.
	if got := sh(t, id, "stat -c %a /workspace/suid"); strings.TrimSpace(got) != "4755" {
		t.Fatalf("mode %q, want 4755", got)
	}
	if mnt := sh(t, id, "grep ' / ' /proc/mounts | head -1"); strings.Contains(mnt, "nosuid") {
		t.Fatalf("root filesystem is nosuid (%q): the probe would prove nothing", mnt)
	}
	out, stderr, code := boxctlRun("exec", "-u", "sandbox", id, "--", "/workspace/suid", "whoami")
	if code != 0 || strings.TrimSpace(out) != "1000" {
		t.Errorf("setuid-root binary as sandbox: euid %q (stderr %q, exit %d), want 1000", out, stderr, code)
	}
}

// TestFileRacesStayInside races the file API and copy-out against sandbox
// root swapping a directory for symlinks (to /etc inside, and to
// /proc/1/root, the init's view) while the calls run. A write as an
// unprivileged user never lands where that user may not write, and a
// copy-out never writes outside its destination on the host. Under runc
// and gVisor (where the file API's init runs on the Sentry's VFS).
func TestFileRacesStayInside(t *testing.T) {
	for _, rt := range []string{"runc", "gvisor"} {
		t.Run(rt, func(t *testing.T) { fileRacesStayInside(t, rt) })
	}
}

func fileRacesStayInside(t *testing.T, runtime string) {
	id := newSandbox(t, "--pids", "64", "--runtime", runtime)
	c := ctx(t)
	sh(t, id, "mkdir -p /workspace/real && chown 1000:1000 /workspace/real && echo payload > /workspace/real/f && "+
		"cp /etc/passwd /tmp/passwd.orig")
	// The racer: /workspace/d flips between the real directory, a link to
	// /etc and a link to the init's root, as fast as busybox can.
	racer, err := boxctl(nil, "exec", "-d", id, "--", "sh", "-c",
		"cd /workspace; while :; do ln -sfn real d; ln -sfn /etc d; ln -sfn /proc/1/root/etc d; done")
	if err != nil {
		t.Fatal(err)
	}
	defer boxctl(nil, "kill", id, strings.TrimSpace(racer))

	dest := t.TempDir()
	sentinel := filepath.Dir(dest)
	before, _ := os.ReadDir(sentinel)
	for i := 0; i < 60; i++ {
		// As the sandbox user: /etc/passwd is root's, so whichever way
		// the link points the write must not reach it.
		_, err := writeFile(c, &boxdv1.WriteFileRequest{SandboxId: id, Path: "/workspace/d/passwd", User: "sandbox"}, strings.NewReader("owned\n"))
		_ = err // lands in real/ or is refused; both fine
		out := filepath.Join(dest, fmt.Sprint(i))
		boxctlRun("cp", id+":/workspace/d", out)
	}
	if got := sh(t, id, "cmp /etc/passwd /tmp/passwd.orig && echo same"); got != "same\n" {
		t.Errorf("/etc/passwd changed by a write as the sandbox user: %q", got)
	}
	// Copies on the host: regular files and directories only inside
	// dest, no link that leads out, nothing new next to dest.
	filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			abs := target
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(filepath.Dir(p), target)
			}
			if rel, err := filepath.Rel(dest, filepath.Clean(abs)); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("copy-out wrote a link leading out of its destination: %s -> %s", p, target)
			}
		}
		return nil
	})
	after, _ := os.ReadDir(sentinel)
	if len(after) != len(before) {
		t.Errorf("entries next to the destination changed: %d before, %d after", len(before), len(after))
	}
}
