package network

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// newNetNS makes a network namespace owned by the host's user namespace
// and pins it with a bind mount at path. Its IPv6 is switched off: boxd
// routes and filters IPv4 only. Its loopback is brought up here, in the
// thread that is in the namespace anyway (one ioctl), rather than by the
// CNI loopback plugin: that plugin is a process of its own per create and
// per delete, and on a busy host its start cost more than the whole rest
// of the namespace's set-up.
func newNetNS(path string, ipv6 bool) (retErr error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	_ = f.Close()
	defer func() {
		if retErr != nil {
			_ = os.Remove(path)
		}
	}()
	errc := make(chan error, 1)
	go func() {
		// The thread ends with the goroutine (it stays locked), so its
		// changed namespace is never reused for other goroutines.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		if err := ipv6Sysctls(ipv6); err != nil {
			errc <- err
			return
		}
		if err := loopbackUp(); err != nil {
			errc <- fmt.Errorf("bring lo up: %w", err)
			return
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind mount: %w", err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	return nil
}

// ipv6Sysctls switches IPv6 off in the calling thread's network
// namespace, or (on) keeps it from taking router advertisements and
// redirects. A kernel without IPv6 has none of the files.
func ipv6Sysctls(on bool) error {
	vals := map[string]string{"disable_ipv6": "1"}
	if on {
		vals = map[string]string{"accept_ra": "0", "accept_redirects": "0", "autoconf": "0"}
	}
	for k, v := range vals {
		for _, dev := range []string{"all", "default"} {
			p := "/proc/sys/net/ipv6/conf/" + dev + "/" + k
			if err := os.WriteFile(p, []byte(v), 0); err != nil && !(errors.Is(err, fs.ErrNotExist) && !on) {
				return fmt.Errorf("set %s to %s: %w", p, v, err)
			}
		}
	}
	return nil
}

// loopbackUp sets IFF_UP on lo in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set flags: %w", err)
	}
	return nil
}

// NetNSAlive reports whether path is a network namespace (a pin that
// survived; after a reboot it is an empty file or missing).
func NetNSAlive(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// removeNetNS unpins and removes a namespace made by newNetNS; a missing
// one is fine. The namespace (and the veth in it) goes once nothing holds it.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns %s: unmount: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	return nil
}
