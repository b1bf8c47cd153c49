//go:build linux

package main

import (
	"syscall"
	"unsafe"
)

// fdWriter writes to boxctl's stdout or stderr as os.Stdout and os.Stderr
// do in the full CLI: all of it across EINTR and short writes, waiting on a
// non-blocking descriptor, and dying of SIGPIPE when the reader has gone
// (so `boxctl exec ID -- yes | head -1` ends the same way).
type fdWriter struct {
	fd   int
	name string
}

func (w *fdWriter) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := syscall.Write(w.fd, p[done:])
		if n > 0 {
			done += n
		}
		switch err {
		case nil:
		case syscall.EINTR:
		case syscall.EAGAIN:
			waitWritable(w.fd)
		case syscall.EPIPE:
			dieOfSIGPIPE()
		default:
			return done, &writeError{w.name, err}
		}
	}
	return done, nil
}

func (w *fdWriter) WriteString(s string) { _, _ = w.Write([]byte(s)) }

// writeError reads as os.PathError does.
type writeError struct {
	path string
	err  error
}

func (e *writeError) Error() string { return "write " + e.path + ": " + e.err.Error() }

// waitWritable blocks until fd can take more output.
func waitWritable(fd int) {
	pfd := struct {
		fd             int32
		events, revent int16
	}{fd: int32(fd), events: 0x4} // POLLOUT
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, 0, 0, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// dieOfSIGPIPE ends the process by SIGPIPE, as the Go runtime does after a
// write to a closed stdout or stderr: the default action restored, the
// signal raised.
func dieOfSIGPIPE() {
	var dfl [4]uint64 // struct sigaction, all zero: SIG_DFL
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGPIPE), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	_ = syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGPIPE)
	syscall.Exit(2)
}
