//go:build linux

package gvchannel

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// listen binds a socket at path and counts its connections.
func listen(t *testing.T, path string) (accepted chan struct{}) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(func() { ln.Close() })
	accepted = make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()
	return accepted
}

// TestDialPinned: the socket found first is pinned and reachable; a
// replacement socket, a symlink to another socket and a regular file are
// refused before any connect; Prepare clears the old socket and pin.
func TestDialPinned(t *testing.T) {
	base := t.TempDir()
	dir, pinPath := filepath.Join(base, "g"), filepath.Join(base, "agent.pin")
	uid, gid := os.Getuid(), os.Getgid()
	if err := Prepare(dir, pinPath, uid, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(dir, uint32(uid)); err == nil {
		t.Fatal("Find in an empty dir succeeded")
	}
	sock := filepath.Join(dir, SocketName)
	first := listen(t, sock)
	pin, err := Find(dir, uint32(uid))
	if err != nil {
		t.Fatal(err)
	}
	if err := WritePin(pinPath, pin); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPin(pinPath)
	if err != nil || got != pin {
		t.Fatalf("ReadPin %+v %v, want %+v", got, err, pin)
	}
	c, err := Dial(context.Background(), dir, uint32(uid), pin)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-first
	if _, err := Dial(context.Background(), dir, uint32(uid)+1, pin); !errors.Is(err, ErrRefused) {
		t.Errorf("socket of another uid: %v, want ErrRefused", err)
	}

	// An impostor replaces the socket.
	os.Remove(sock)
	impostor := listen(t, sock)
	if _, err := Dial(context.Background(), dir, uint32(uid), pin); !errors.Is(err, ErrRefused) {
		t.Errorf("replaced socket: %v, want ErrRefused", err)
	}

	// A symlink to a socket elsewhere (a host daemon's).
	other := filepath.Join(base, "other.sock")
	target := listen(t, other)
	os.Remove(sock)
	if err := os.Symlink(other, sock); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), dir, uint32(uid), pin); !errors.Is(err, ErrRefused) {
		t.Errorf("symlink: %v, want ErrRefused", err)
	}
	if _, err := Find(dir, uint32(uid)); !errors.Is(err, ErrRefused) {
		t.Errorf("Find on a symlink: %v, want ErrRefused", err)
	}
	// A regular file.
	os.Remove(sock)
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(dir, uint32(uid)); !errors.Is(err, ErrRefused) {
		t.Errorf("Find on a file: %v, want ErrRefused", err)
	}
	select {
	case <-impostor:
		t.Error("the impostor got a connection")
	case <-target:
		t.Error("the symlink's target got a connection")
	default:
	}

	if err := Prepare(dir, pinPath, uid, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("Prepare left %s: %v", sock, err)
	}
	if _, err := os.Stat(pinPath); !os.IsNotExist(err) {
		t.Errorf("Prepare left the pin: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("agent dir %v %v, want 0700", fi.Mode(), err)
	}
}
