//go:build linux

package main

import (
	"bytes"
	"io"
	"syscall"
	"testing"
	"time"
)

// TestWriterWaitsOnNonBlocking: output to a non-blocking pipe that fills
// up arrives whole, as os.File delivers it.
func TestWriterWaitsOnNonBlocking(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[0])
	want := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB, 16 pipe buffers
	done := make(chan error, 1)
	go func() {
		w := &fdWriter{fd: p[1], name: "/dev/stdout"}
		n, err := w.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		syscall.Close(p[1])
		done <- err
	}()
	var got []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := syscall.Read(p[0], buf)
		if err == syscall.EAGAIN {
			time.Sleep(time.Millisecond) // a slow reader
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		got = append(got, buf[:n]...)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want %d", len(got), len(want))
	}
}

// TestWriterError: other write errors read as os.File's.
func TestWriterError(t *testing.T) {
	w := &fdWriter{fd: -1, name: "/dev/stdout"}
	if _, err := w.Write([]byte("x")); err == nil || err.Error() != "write /dev/stdout: bad file descriptor" {
		t.Fatalf("error %v", err)
	}
}
