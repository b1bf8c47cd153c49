//go:build linux

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPostureFromHost checks the sandbox's PID 1 as the host sees it.
func TestPostureFromHost(t *testing.T) {
	id := newSandbox(t, "--memory", "64m", "--cpus", "0.5", "--pids", "32")
	pid := inspect(t, id).InitPid
	if pid <= 0 {
		t.Fatalf("init pid %d", pid)
	}
	status := readProc(t, pid, "status")
	for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want) {
			t.Errorf("/proc/%d/status lacks %q", pid, want)
		}
	}
	capEff := field(status, "CapEff:")
	capBnd := field(status, "CapBnd:")
	const wantCaps = 0x00000000000005fb // CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE SYS_CHROOT
	for name, v := range map[string]string{"CapEff": capEff, "CapBnd": capBnd} {
		got, err := strconv.ParseUint(v, 16, 64)
		if err != nil || got != wantCaps|1<<18 {
			t.Errorf("%s = %s, want %x", name, v, wantCaps|1<<18)
		}
	}
	if got := strings.Fields(readProc(t, pid, "uid_map")); len(got) != 3 || !validUIDMap(strings.Join(got, ":")) {
		t.Errorf("uid_map = %v, want 0 and one of the blocks 200000+k*65536 of size 65536", got)
	}
	for _, ns := range []string{"pid", "net", "mnt", "ipc", "uts", "user"} {
		host, _ := os.Readlink("/proc/self/ns/" + ns)
		sb, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err != nil || sb == host {
			t.Errorf("namespace %s shared with the host (%s, %v)", ns, sb, err)
		}
	}
	limits := readProc(t, pid, "limits")
	for _, want := range []string{"Max core file size        0                    0", "Max open files            1024                 1024"} {
		if !strings.Contains(limits, want) {
			t.Errorf("/proc/%d/limits lacks %q:\n%s", pid, want, limits)
		}
	}
	if v := readProc(t, pid, "oom_score_adj"); strings.TrimSpace(v) != "500" {
		t.Errorf("init's oom_score_adj = %q, want 500 (commands run at 1000)", v)
	}
	// Cgroup limits as the kernel holds them (v1 here, v2 on most hosts).
	mem, pids, quota := cgroupLimits(t, id)
	if mem != 64<<20 || pids != 32 || quota != 50000 {
		t.Errorf("cgroup memory %d, pids %d, cpu quota %d; want %d, 32, 50000", mem, pids, quota, 64<<20)
	}
}

func readProc(t *testing.T, pid int64, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func field(status, key string) string {
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, key) {
			return strings.TrimSpace(strings.TrimPrefix(l, key))
		}
	}
	return ""
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("read %s: %v", path, err)
		return -1
	}
	s := strings.Fields(string(b))
	if len(s) == 0 {
		return -1
	}
	v, err := strconv.ParseInt(s[0], 10, 64)
	if err != nil {
		return -1
	}
	return v
}

func cgroupLimits(t *testing.T, id string) (mem, pids, quota int64) {
	return cgroupLimitsNS(t, namespace, id)
}

func cgroupLimitsNS(t *testing.T, ns, id string) (mem, pids, quota int64) {
	rel := "/" + ns + "/" + id
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil { // v2
		return readInt(t, "/sys/fs/cgroup"+rel+"/memory.max"), readInt(t, "/sys/fs/cgroup"+rel+"/pids.max"), readInt(t, "/sys/fs/cgroup"+rel+"/cpu.max")
	}
	if sw := readInt(t, "/sys/fs/cgroup/memory"+rel+"/memory.memsw.limit_in_bytes"); sw != -1 {
		if lim := readInt(t, "/sys/fs/cgroup/memory"+rel+"/memory.limit_in_bytes"); sw != lim {
			t.Errorf("memsw limit %d != memory limit %d: the sandbox can swap", sw, lim)
		}
	}
	return readInt(t, "/sys/fs/cgroup/memory"+rel+"/memory.limit_in_bytes"),
		readInt(t, "/sys/fs/cgroup/pids"+rel+"/pids.max"),
		readInt(t, "/sys/fs/cgroup/cpu"+rel+"/cpu.cfs_quota_us")
}

// TestEscapeAttempts runs what hostile code would try, each with its
// expected refusal.
func TestEscapeAttempts(t *testing.T) {
	id := newSandbox(t, "--memory", "64m", "--pids", "48")
	for _, tc := range []struct{ name, script string }{
		{"mount", "mount -t tmpfs none /mnt"},
		{"remount proc", "mount -o remount,rw /proc/sys"},
		{"sysrq", "echo b > /proc/sysrq-trigger"},
		{"kcore", "head -c 1 /proc/kcore | wc -c | grep -qx 1"},
		{"write /proc/sys", "echo 1 > /proc/sys/kernel/panic"},
		{"mknod", "mknod /tmp/sda b 8 0"},
		{"network", "wget -q -T 2 -O- http://192.0.2.1/"},
		{"raw socket", "ping -c 1 -W 1 127.0.0.1"},
		{"chroot escape", "chroot /proc/1/root/.. true && ls /proc/1/root/../../host-root-marker"},
		{"init channel as non-root", "su -s /bin/sh nobody -c 'ls /.boxd/run'"},
		{"write init binary", "echo x > /.boxd/init"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := boxctlRun("exec", "--timeout", "10s", id, "--", "sh", "-c", tc.script)
			if code == 0 {
				t.Errorf("%q succeeded inside the sandbox: %s%s", tc.script, out, stderr)
			}
		})
	}
	// Only loopback exists and it is up.
	if got := sh(t, id, "ls /sys/class/net"); strings.Fields(got)[0] != "lo" || len(strings.Fields(got)) != 1 {
		t.Errorf("interfaces = %q, want lo only", got)
	}
	if got := sh(t, id, "cat /proc/net/route | wc -l"); strings.TrimSpace(got) != "1" {
		t.Errorf("route table has entries: %q", got)
	}
	if got := sh(t, id, "cat /etc/resolv.conf 2>/dev/null | grep -c nameserver || true"); strings.TrimSpace(got) != "0" {
		t.Errorf("resolv.conf names a nameserver: %q", got)
	}
	// Devices: only the safe set.
	got := sh(t, id, "ls /dev")
	for _, bad := range []string{"sda", "vda", "kmsg", "mem", "fuse"} {
		for _, f := range strings.Fields(got) {
			if f == bad {
				t.Errorf("/dev/%s present", bad)
			}
		}
	}
}

func TestForkBombIsCapped(t *testing.T) {
	id := newSandbox(t, "--pids", "40")
	initPid := inspect(t, id).InitPid
	for round := 0; round < 2; round++ {
		_, _, code := boxctlRun("exec", "--timeout", "3s", id, "--", "sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 10")
		if code != 124 {
			t.Errorf("fork bomb exec exit %d, want 124 (timed out, tree killed)", code)
		}
	}
	// The init survived: the pids limit counts threads, and an init that
	// could not start one would have died (and been restarted).
	if pid := inspect(t, id).InitPid; pid != initPid {
		t.Errorf("init pid changed from %d to %d: the fork bomb killed the init", initPid, pid)
	}
	// The sandbox is still usable afterwards and the host counted at most
	// the limit.
	if out := sh(t, id, "echo alive"); out != "alive\n" {
		t.Errorf("after fork bomb: %q", out)
	}
	_, pids, _ := cgroupLimits(t, id)
	if pids != 40 {
		t.Errorf("pids.max = %d", pids)
	}
}

func TestMemoryLimitKills(t *testing.T) {
	id := newSandbox(t, "--memory", "48m")
	// dd allocates and fills a 200 MiB buffer: it cannot fit in 48 MiB.
	_, _, code := boxctlRun("exec", "--timeout", "30s", id, "--", "sh", "-c", "dd if=/dev/zero of=/dev/null bs=200M count=1")
	if code == 0 {
		t.Errorf("a 200 MB allocation succeeded under a 48m limit")
	}
	if out := sh(t, id, "echo alive"); out != "alive\n" {
		t.Errorf("after OOM: %q", out)
	}
	if u := inspect(t, id).Usage; u == nil || u.OomKills < 1 || u.MemoryPeakBytes > 48<<20+1<<20 {
		t.Errorf("usage after OOM = %+v, want oom_kills >= 1 and a peak near the 48m limit", u)
	}
}

// TestInitIsNotDumpable: root in the sandbox cannot read the init's memory.
func TestInitIsNotDumpable(t *testing.T) {
	id := newSandbox(t)
	if out, stderr, code := boxctlRun("exec", id, "--", "cat", "/proc/1/environ"); code == 0 {
		t.Errorf("sandbox read the init's environment: %q %q", out, stderr)
	}
}
