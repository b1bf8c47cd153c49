//go:build linux

package gvchannel

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
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

// listenAs is listen with the socket file then owned by uid:gid, as a
// sandbox root's socket is on the host (the test runs as host root).
func listenAs(t *testing.T, path string, uid, gid int) chan struct{} {
	t.Helper()
	accepted := listen(t, path)
	if err := os.Lchown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	return accepted
}

// TestDialPinned: the socket found first is pinned and reachable; a
// replacement socket, a symlink to another socket and a regular file are
// refused before any connect; Prepare clears the old socket and pin.
func TestDialPinned(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root: the sockets are chowned to a sandbox root's host uid")
	}
	base := t.TempDir()
	dir, pinPath := filepath.Join(base, "g"), filepath.Join(base, "agent.pin")
	const uid, gid = 4242, 4242 // a sandbox root's host ids
	if err := Prepare(dir, pinPath, uid, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(dir, uint32(uid)); err == nil {
		t.Fatal("Find in an empty dir succeeded")
	}
	sock := filepath.Join(dir, SocketName)
	first := listenAs(t, sock, uid, gid)
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
	if pin.UID != uint32(uid) {
		t.Fatalf("pin uid %d, want %d", pin.UID, uid)
	}
	c, err := Dial(context.Background(), dir, pin)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-first
	if _, err := Dial(context.Background(), dir, pin.WithUID(uint32(uid)+1)); !errors.Is(err, ErrRefused) {
		t.Errorf("socket of another uid: %v, want ErrRefused", err)
	}
	if _, err := Dial(context.Background(), dir, pin.WithUID(0)); !errors.Is(err, ErrRefused) {
		t.Errorf("pin without a uid: %v, want ErrRefused", err)
	}

	// The sandbox's root chowns the directory (to another id of its
	// block): the expected owner comes from the pin, so the pinned
	// socket still answers, and a socket of the directory's new owner is
	// refused for its owner before any connect.
	if err := os.Chown(dir, uid+1000, gid+1000); err != nil {
		t.Fatal(err)
	}
	c, err = Dial(context.Background(), dir, pin)
	if err != nil {
		t.Fatalf("pinned socket after a chown of its directory: %v", err)
	}
	c.Close()
	<-first
	os.Remove(sock)
	byOwner := listenAs(t, sock, uid+1000, gid+1000)
	if _, err := Dial(context.Background(), dir, pin); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "want the sandbox root's 4242") {
		t.Errorf("socket of the chowned directory's owner: %v, want the owner refusal", err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}

	// An impostor replaces the socket.
	os.Remove(sock)
	impostor := listenAs(t, sock, uid, gid)
	if _, err := Dial(context.Background(), dir, pin); !errors.Is(err, ErrRefused) {
		t.Errorf("replaced socket: %v, want ErrRefused", err)
	}

	// A symlink to a socket elsewhere (a host daemon's).
	other := filepath.Join(base, "other.sock")
	target := listen(t, other)
	os.Remove(sock)
	if err := os.Symlink(other, sock); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), dir, pin); !errors.Is(err, ErrRefused) {
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
	case <-byOwner:
		t.Error("the chowned directory's owner got a connection")
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
