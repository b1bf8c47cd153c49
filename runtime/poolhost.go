//go:build linux

// Room: pools. What a hand-out sets inside a running member from the
// host: its hostname, in the member's own UTS namespace.

package runtime

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// setMemberHostname sets the hostname of the member whose init is pid and
// whose uid block starts at hostID, as a cold create's spec would have had
// runc set it. The pid is opened once as a directory and everything is
// read relative to it, so a pid reused by another process cannot be
// mistaken for the member (its /proc entry would be another directory);
// the uid map read through it must be the member's own block, and its
// UTS namespace must not be boxd's.
func setMemberHostname(pid, hostID uint32, hostname string) error {
	dir, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10))
	if err != nil {
		return fmt.Errorf("hostname: open the init: %w", err)
	}
	defer dir.Close()
	dfd := int(dir.Fd())
	if err := checkMemberUIDMap(dfd, hostID); err != nil {
		return err
	}
	nsfd, err := unix.Openat(dfd, "ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("hostname: open the UTS namespace: %w", err)
	}
	defer unix.Close(nsfd)
	var theirs, ours unix.Stat_t
	if err := unix.Fstat(nsfd, &theirs); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := unix.Stat("/proc/self/ns/uts", &ours); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if theirs.Ino == ours.Ino && theirs.Dev == ours.Dev {
		return fmt.Errorf("hostname: the init shares boxd's UTS namespace")
	}
	errc := make(chan error, 1)
	go func() {
		// The thread stays locked and ends with the goroutine, so its
		// changed namespace is never used by other goroutines.
		goruntime.LockOSThread()
		if err := unix.Setns(nsfd, unix.CLONE_NEWUTS); err != nil {
			errc <- fmt.Errorf("hostname: setns: %w", err)
			return
		}
		errc <- unix.Sethostname([]byte(hostname))
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	return nil
}

// checkMemberUIDMap checks that the process of /proc directory dfd maps
// root to hostID: the uid block no other sandbox holds.
func checkMemberUIDMap(dfd int, hostID uint32) error {
	fd, err := unix.Openat(dfd, "uid_map", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("hostname: read the init's uid map: %w", err)
	}
	f := os.NewFile(uintptr(fd), "uid_map")
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := f.Read(buf)
	fields := strings.Fields(string(buf[:n]))
	if len(fields) < 3 || fields[0] != "0" || fields[1] != strconv.FormatUint(uint64(hostID), 10) {
		return fmt.Errorf("hostname: pid is not the member's init (uid map %q)", strings.TrimSpace(string(buf[:n])))
	}
	return nil
}
