//go:build linux

package wire

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// splicePipeSize is the pipe each direction of a Splice moves data
// through: one splice(2) moves at most this much. 1 MiB is the default
// /proc/sys/fs/pipe-max-size, so the sandbox's root may size its pipes so
// too; where the kernel refuses, the pipe keeps its 64 KiB and the copy
// only takes more calls.
const splicePipeSize = 1 << 20

// spliceCopy copies src to dst until src's EOF, with splice(2) from src
// into a pipe and from the pipe into dst, when both are sockets (TCP or
// Unix stream); otherwise with io.Copy.
//
// Why not io.Copy, which splices too for TCP<->Unix: the standard
// library's loop makes each splice a blocking system call for the Go
// scheduler. A 1 MiB splice through loopback TCP runs for a few hundred
// microseconds, long enough that the runtime's monitor hands the
// goroutine's processor to another thread each time, which wakes, spins
// and sleeps again: on a 2-core host that cost the init and boxd about a
// fifth of their CPU time per published-port byte (profiled with perf).
// Here every splice is non-blocking on both sides (SPLICE_F_NONBLOCK for
// the pipe, O_NONBLOCK on the sockets, which Go sets and which belong to
// this process alone), so it is made as a raw system call, and waits go
// through the netpoller (syscall.RawConn), which also honours Close and
// deadlines.
func spliceCopy(dst, src net.Conn) (int64, error) {
	sc, sok := src.(syscall.Conn)
	dc, dok := dst.(syscall.Conn)
	if !sok || !dok || !isStreamSocket(src) || !isStreamSocket(dst) {
		return io.Copy(dst, src)
	}
	srcRC, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	dstRC, err := dc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return 0, err
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	_, _ = unix.FcntlInt(uintptr(p[0]), unix.F_SETPIPE_SZ, splicePipeSize)

	var written int64
	for {
		// Fill: whatever src has, up to a pipe's worth. The pipe is empty
		// here, so EAGAIN means src has nothing yet.
		var inPipe int
		var serr error
		if err := srcRC.Read(func(fd uintptr) bool {
			inPipe, serr = rawSplice(int(fd), p[1], splicePipeSize)
			return serr != unix.EAGAIN
		}); err != nil {
			return written, err
		}
		if serr != nil {
			if serr == unix.EINVAL && written == 0 {
				// The kernel cannot splice from this socket; nothing
				// was consumed, so a plain copy can take over.
				return io.Copy(dst, src)
			}
			return written, serr
		}
		if inPipe == 0 {
			return written, nil // src's EOF
		}
		// Drain: all of it into dst, waiting while dst's buffer is full.
		for inPipe > 0 {
			var n int
			var werr error
			if err := dstRC.Write(func(fd uintptr) bool {
				n, werr = rawSplice(p[0], int(fd), inPipe)
				return werr != unix.EAGAIN
			}); err != nil {
				return written, err
			}
			if werr != nil {
				return written, werr
			}
			if n == 0 {
				return written, io.ErrShortWrite
			}
			inPipe -= n
			written += int64(n)
		}
	}
}

// rawSplice moves up to n bytes from in to out. Both must be
// non-blocking, which makes the raw (scheduler-invisible) call safe.
func rawSplice(in, out, n int) (int, error) {
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_SPLICE, uintptr(in), 0, uintptr(out), 0, uintptr(n), unix.SPLICE_F_NONBLOCK)
		switch e {
		case 0:
			return int(r), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// isStreamSocket reports whether c is a TCP or Unix stream connection.
func isStreamSocket(c net.Conn) bool {
	switch c := c.(type) {
	case *net.TCPConn:
		return true
	case *net.UnixConn:
		var typ int
		var err error
		rc, rerr := c.SyscallConn()
		if rerr != nil {
			return false
		}
		if cerr := rc.Control(func(fd uintptr) {
			typ, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		}); cerr != nil || err != nil {
			return false
		}
		return typ == unix.SOCK_STREAM
	}
	return false
}
