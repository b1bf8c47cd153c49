//go:build linux

package testenv

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"unsafe"
)

// DialAs returns a dial function that connects to the Unix socket sock
// with another user's credentials (uid, gid, supplementary groups): the
// connect runs on an OS thread whose ids alone are changed (the raw
// syscalls change one thread, unlike syscall.Setuid, which changes all),
// so the kernel's permission checks on the socket path and the peer's
// SO_PEERCRED and SO_PEERGROUPS see that user. The thread is never
// unlocked: it ends with its goroutine and nothing else ever runs as the
// user. The caller must be root.
func DialAs(uid, gid uint32, groups []uint32, sock string) func(ctx context.Context, _, _ string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread()
			gs := append([]uint32{gid}, groups...)
			if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(gs)), uintptr(unsafe.Pointer(&gs[0])), 0); e != 0 {
				ch <- res{err: fmt.Errorf("setgroups: %w", e)}
				return
			}
			if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
				ch <- res{err: fmt.Errorf("setresgid: %w", e)}
				return
			}
			if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
				ch <- res{err: fmt.Errorf("setresuid: %w", e)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", sock)
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}
