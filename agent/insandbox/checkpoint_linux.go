//go:build linux

package insandbox

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/boxd-dev/boxd/agent/wire"
)

// errParked is Serve's return when checkpoint-prepare closed its listener:
// the init goes on, without a channel until Rebind gives it a new one.
var errParked = errors.New("agent: listener parked for a checkpoint")

// ckState is the init's part in a checkpoint (wire.OpCheckpointPrepare).
type ckState struct {
	parked bool
	secret []byte
	conns  map[net.Conn]struct{}
}

// trackConn records an agent connection, which checkpoint-prepare closes.
func (s *Server) trackConn(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ck.conns == nil {
		s.ck.conns = make(map[net.Conn]struct{})
	}
	s.ck.conns[c] = struct{}{}
}

func (s *Server) untrackConn(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ck.conns, c)
}

func (s *Server) isParked() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ck.parked
}

// Unpark reports whether the listener was parked by checkpoint-prepare,
// and takes it out of that state: the caller then serves a new listener.
func (s *Server) Unpark() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.ck.parked
	s.ck.parked = false
	return was
}

// checkpointPrepare lets go of every host socket the init holds: its
// listeners and every agent connection, this one last, after the ok (see
// wire.OpCheckpointPrepare). Only a server that can bind a new listener
// (CanRebind: under gVisor) offers it.
func (s *Server) checkpointPrepare(conn net.Conn, _ *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.CheckpointPrepare
	if err := fsDecodeArgs(req, &a); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	if len(a.Secret) != wire.CheckpointSecretSize {
		s.replyError(fw, req.Op, fmt.Errorf("%w: the secret must be %d bytes", wire.ErrInvalid, wire.CheckpointSecretSize))
		return
	}
	if !s.CanRebind {
		s.replyError(fw, req.Op, fmt.Errorf("%w: this init cannot bind a new agent socket", wire.ErrInvalid))
		return
	}
	s.mu.Lock()
	s.ck.parked = true
	s.ck.secret = append([]byte(nil), a.Secret...)
	lns := s.listeners
	s.listeners = nil
	var others []net.Conn
	for c := range s.ck.conns {
		if c != conn {
			others = append(others, c)
		}
	}
	s.mu.Unlock()
	for ln := range lns {
		ln.Close()
		// The socket's file goes too: gVisor's restore walks again to
		// every file the sandbox's kernel knows, and boxd removes this one
		// on the host before a restore.
		if a, ok := ln.Addr().(*net.UnixAddr); ok && a.Name != "" {
			os.Remove(a.Name)
		}
	}
	for _, c := range others {
		c.Close()
	}
	fw.WriteFrame(wire.FrameOK, nil)
	// handle closes conn on return: boxd reads the EOF.
}

// checkpointResume proves to boxd that this is the init it prepared.
func (s *Server) checkpointResume(_ net.Conn, _ *wire.FrameReader, fw *wire.FrameWriter, req *wire.Request) {
	var a wire.CheckpointResume
	if err := fsDecodeArgs(req, &a); err != nil {
		s.replyError(fw, req.Op, err)
		return
	}
	s.mu.Lock()
	secret := s.ck.secret
	s.mu.Unlock()
	if len(secret) == 0 || len(a.Nonce) != wire.CheckpointSecretSize {
		s.replyError(fw, req.Op, fmt.Errorf("%w: no checkpoint to resume from", wire.ErrInvalid))
		return
	}
	fw.WriteJSON(wire.FrameOK, wire.CheckpointProof{MAC: wire.CheckpointMAC(secret, a.Nonce)})
}
