//go:build linux

package wire

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// unixPair returns both ends of a Unix stream connection.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.UnixConn), s.(*net.UnixConn)
}

// TestSpliceTCPUnix: Splice between a TCP and a Unix stream connection (a
// published port's two ends) carries 8 MiB of random bytes each way
// intact, passes each EOF on as a half-close, and returns both counts.
func TestSpliceTCPUnix(t *testing.T) {
	client, tcpEnd := tcpPair(t)
	unixEnd, server := unixPair(t)
	const size = 8 << 20
	up := make([]byte, size)
	down := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(up)
	rand.New(rand.NewSource(2)).Read(down)

	type result struct {
		a, b int64
	}
	done := make(chan result, 1)
	go func() {
		a, b := Splice(tcpEnd, unixEnd)
		done <- result{a, b}
	}()
	deadline := time.Now().Add(30 * time.Second)
	client.SetDeadline(deadline)
	server.SetDeadline(deadline)

	// Both directions at once: the server reads everything, then answers
	// after the client's half-close.
	serverGot := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(server)
		serverGot <- b
		server.Write(down)
		server.CloseWrite()
	}()
	go func() {
		client.Write(up)
		client.CloseWrite()
	}()
	clientGot, err := io.ReadAll(client)
	if err != nil {
		t.Fatalf("client read: %v", err)
	}
	if got := <-serverGot; sha256.Sum256(got) != sha256.Sum256(up) {
		t.Errorf("server got %d bytes, not the %d the client sent", len(got), size)
	}
	if !bytes.Equal(clientGot, down) {
		t.Errorf("client got %d bytes, not the %d the server sent", len(clientGot), size)
	}
	select {
	case r := <-done:
		if r.a != size || r.b != size {
			t.Errorf("Splice counted %d and %d bytes, want %d each", r.a, r.b, size)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Splice did not return after both directions ended")
	}
}

// TestSpliceStalledPeer: a peer that never reads leaves the copy waiting
// with its buffers full (not spinning, not buffering without bound), and
// closing one end ends Splice at once.
func TestSpliceStalledPeer(t *testing.T) {
	client, tcpEnd := tcpPair(t)
	unixEnd, _ := unixPair(t) // the far end never reads
	done := make(chan struct{})
	go func() {
		Splice(tcpEnd, unixEnd)
		close(done)
	}()
	// Write until the path is full: the writes stop being accepted.
	client.SetWriteDeadline(time.Now().Add(3 * time.Second))
	chunk := make([]byte, 1<<20)
	var sent int64
	for {
		n, err := client.Write(chunk)
		sent += int64(n)
		if err != nil {
			break
		}
		if sent > 1<<30 {
			t.Fatal("1 GiB accepted by a path whose reader never reads: buffering is unbounded")
		}
	}
	select {
	case <-done:
		t.Fatal("Splice returned while both ends were open")
	default:
	}
	client.Close()
	unixEnd.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Splice still running 5 s after its connections were closed")
	}
}

// TestSpliceResetAbortsBoth: a reset on one side closes the other at once
// rather than leaving it waiting.
func TestSpliceResetAbortsBoth(t *testing.T) {
	client, tcpEnd := tcpPair(t)
	unixEnd, server := unixPair(t)
	done := make(chan struct{})
	go func() {
		Splice(tcpEnd, unixEnd)
		close(done)
	}()
	client.SetLinger(0)
	client.Close() // RST
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := server.Read(make([]byte, 1)); err == nil {
		t.Error("the far side read data after a reset")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the far side was left open after a reset")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Splice did not return after a reset")
	}
}
