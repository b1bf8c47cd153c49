//go:build linux

// Package handoff gives a sandbox's init its channel to boxd without boxd
// ever trusting a path the sandbox can change.
//
// boxd creates the agent's listening socket itself (ListenAgent), in a host
// directory only host root can reach, and dials it by that path for every
// operation. The init gets the listening socket's file descriptor, not a
// path: at start boxd listens on a one-shot socket (Listen) in a read-only
// directory mounted into the sandbox, the init connects to it (Receive), and
// boxd checks the peer's credentials as the kernel reports them
// (SO_PEERCRED: pid and uid as the host sees them) against the task's pid
// and the sandbox root's host uid. Only that peer gets the one message: the
// init's Config and the listener's descriptor (SCM_RIGHTS). Anything else
// that connects is closed unanswered.
//
// The init reads its settings from Config, never from its environment, so
// neither an image nor a request can steer the init's Go runtime (GODEBUG,
// GOMAXPROCS, ...) or its behaviour through environment variables.
package handoff

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// SocketName is the hand-off socket's name in the directory boxd mounts at
// agent.ChannelDir.
const SocketName = "handoff.sock"

// MaxConfigBytes bounds the encoded Config. The request's env is capped at
// 64 KiB; the rest is an image's env, which is not capped at import.
const MaxConfigBytes = 1 << 20

// headerLen is the length prefix before the JSON Config.
const headerLen = 4

// maxRefusalLogs bounds the log lines about refused peers per Offer.
const maxRefusalLogs = 3

// Config is everything the init is told at start. It is stored with the
// sandbox (boxd keeps it in the runtime-spec) so that a restarted init gets
// the same.
type Config struct {
	// Workdir is the default working directory of commands, created by the
	// init if missing.
	Workdir string `json:"workdir"`
	// Env is the environment every command starts from (K=V).
	Env []string `json:"env"`
	// Pids is the sandbox's pids limit, which sizes the init's thread
	// pre-warming; 0 means unknown.
	Pids int64 `json:"pids,omitempty"`
	// User is who commands run as when a request names nobody (NAME, UID,
	// NAME:GROUP or UID:GID, resolved by the init in the sandbox's own
	// /etc/passwd); empty is root.
	User string `json:"user,omitempty"`
}

// Encode returns c as the hand-off message's body.
func (c Config) Encode() ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("handoff: encode config: %w", err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("handoff: config of %d bytes (environment of %d entries), at most %d allowed", len(b), len(c.Env), MaxConfigBytes)
	}
	return b, nil
}

// Decode parses and checks a hand-off message's body.
func Decode(b []byte) (Config, error) {
	var c Config
	if len(b) > MaxConfigBytes {
		return c, fmt.Errorf("handoff: config of %d bytes, at most %d allowed", len(b), MaxConfigBytes)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("handoff: decode config: %w", err)
	}
	if c.Workdir != "" && !filepath.IsAbs(c.Workdir) {
		return c, fmt.Errorf("handoff: workdir %q is not absolute", c.Workdir)
	}
	if len(c.User) > 256 || strings.IndexByte(c.User, 0) >= 0 {
		return c, fmt.Errorf("handoff: user %q is not a user spec", c.User)
	}
	if c.Pids < 0 {
		return c, fmt.Errorf("handoff: pids %d is negative", c.Pids)
	}
	for i, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return c, fmt.Errorf("handoff: env[%d] is not KEY=VALUE", i)
		}
	}
	return c, nil
}

// ListenAgent creates the agent's listening socket at path and returns its
// descriptor (close-on-exec). A stale socket at path is replaced. The socket
// file stays when the descriptor is closed: once the init holds the
// listener, path keeps reaching it, also across restarts of boxd. path's
// directory must be one only host root can write to.
func ListenAgent(path string) (*os.File, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("handoff: agent socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		f.Close()
		return nil, fmt.Errorf("handoff: bind %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("handoff: chmod %s: %w", path, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		f.Close()
		return nil, fmt.Errorf("handoff: listen %s: %w", path, err)
	}
	return f, nil
}

// removeStale removes a socket a previous init left at path. Anything else
// there is an error: boxd's own directory never holds it.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("handoff: %w", err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("handoff: %s exists and is not a socket (%v)", path, fi.Mode().Type())
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("handoff: remove stale socket: %w", err)
	}
	return nil
}

// Peer is the one process that may take the listener, as the host sees it.
type Peer struct {
	Pid int    // the init's pid in boxd's pid namespace (the task's pid)
	UID uint32 // the sandbox root's host uid
}

// Listener is boxd's end of one hand-off.
type Listener struct {
	ln   *net.UnixListener
	path string
}

// Listen creates the hand-off socket at path, owned by uid:gid (the sandbox
// root's host ids) and mode 0600, so that nothing else in the sandbox can
// even connect. path's directory must not be writable by the sandbox.
func Listen(path string, uid, gid int) (*Listener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("handoff: listen: %w", err)
	}
	l := &Listener{ln: ln, path: path}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("handoff: chmod %s: %w", path, err)
	}
	if err := os.Lchown(path, uid, gid); err != nil {
		l.Close()
		return nil, fmt.Errorf("handoff: chown %s: %w", path, err)
	}
	return l, nil
}

// Close stops listening and removes the socket file.
func (l *Listener) Close() error {
	err := l.ln.Close()
	if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

// Offer waits until want connects and sends it cfg and agent's descriptor.
// Every other peer is closed unanswered (the first few logged through
// logf, which may be nil). Nothing the peer sends is read. Offer returns
// once the message is written, or when ctx ends.
func (l *Listener) Offer(ctx context.Context, want Peer, cfg Config, agent *os.File, logf func(string, ...any)) error {
	body, err := cfg.Encode()
	if err != nil {
		return err
	}
	msg := make([]byte, headerLen+len(body))
	binary.BigEndian.PutUint32(msg, uint32(len(body)))
	copy(msg[headerLen:], body)

	stop := context.AfterFunc(ctx, func() { l.ln.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	refused := 0
	for {
		c, err := l.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			if refused > 0 {
				return fmt.Errorf("handoff: waiting for pid %d uid %d (refused %d other peers): %w", want.Pid, want.UID, refused, err)
			}
			return fmt.Errorf("handoff: waiting for pid %d uid %d: %w", want.Pid, want.UID, err)
		}
		got, err := peerCred(c)
		if err != nil || int(got.Pid) != want.Pid || got.Uid != want.UID {
			refused++
			if logf != nil && refused <= maxRefusalLogs {
				if err != nil {
					logf("handoff: refused a peer: %v", err)
				} else {
					logf("handoff: refused peer pid %d uid %d, want pid %d uid %d", got.Pid, got.Uid, want.Pid, want.UID)
				}
			}
			c.Close()
			continue
		}
		err = send(ctx, c, msg, agent)
		c.Close()
		if err != nil {
			return fmt.Errorf("handoff: send to pid %d: %w", want.Pid, err)
		}
		return nil
	}
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return cred, nil
}

// send writes msg with agent's descriptor attached to its first byte. A
// stream socket may take a long message in several writes; the
// descriptor goes with the first.
func send(ctx context.Context, c *net.UnixConn, msg []byte, agent *os.File) error {
	if dl, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(dl)
	}
	n, _, err := c.WriteMsgUnix(msg, unix.UnixRights(int(agent.Fd())), nil)
	if err != nil {
		return err
	}
	if n < len(msg) {
		_, err = c.Write(msg[n:])
	}
	return err
}

// Receive is the init's end: it connects to the hand-off socket at path and
// returns the Config and the agent listener boxd sent. The descriptor is
// received close-on-exec (MSG_CMSG_CLOEXEC), so it never reaches a
// command. timeout bounds the whole exchange.
func Receive(path string, timeout time.Duration) (Config, net.Listener, error) {
	var cfg Config
	nc, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return cfg, nil, fmt.Errorf("handoff: connect: %w", err)
	}
	defer nc.Close()
	c := nc.(*net.UnixConn)
	c.SetDeadline(time.Now().Add(timeout))

	buf := make([]byte, 64<<10)
	n, fd, err := recvFirst(c, buf)
	if err != nil {
		return cfg, nil, err
	}
	f := os.NewFile(uintptr(fd), "agent-listener")
	defer f.Close() // FileListener keeps a copy of its own
	for n < headerLen {
		m, err := c.Read(buf[n:headerLen])
		if err != nil {
			return cfg, nil, fmt.Errorf("handoff: read header: %w", err)
		}
		n += m
	}
	size := int(binary.BigEndian.Uint32(buf))
	if size > MaxConfigBytes {
		return cfg, nil, fmt.Errorf("handoff: config of %d bytes, at most %d allowed", size, MaxConfigBytes)
	}
	body := make([]byte, size)
	got := copy(body, buf[headerLen:n])
	if got < size {
		if _, err := io.ReadFull(c, body[got:]); err != nil {
			return cfg, nil, fmt.Errorf("handoff: read config: %w", err)
		}
	}
	if cfg, err = Decode(body); err != nil {
		return cfg, nil, err
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return cfg, nil, fmt.Errorf("handoff: agent listener: %w", err)
	}
	return cfg, ln, nil
}

// recvFirst reads the first piece of the message and the one descriptor
// that comes with it.
func recvFirst(c *net.UnixConn, buf []byte) (n, fd int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, -1, err
	}
	oob := make([]byte, unix.CmsgSpace(4*4)) // room to notice extra descriptors
	var oobn, flags int
	var rerr error
	err = raw.Read(func(s uintptr) bool {
		n, oobn, flags, _, rerr = unix.Recvmsg(int(s), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, -1, fmt.Errorf("handoff: receive: %w", err)
	}
	var fds []int
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			return 0, -1, fmt.Errorf("handoff: control message: %w", perr)
		}
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	switch {
	case n == 0 && len(fds) == 0:
		return 0, -1, fmt.Errorf("handoff: closed without a message (refused?): %w", io.ErrUnexpectedEOF)
	case flags&unix.MSG_CTRUNC != 0 || len(fds) != 1:
		for _, fd := range fds {
			unix.Close(fd)
		}
		return 0, -1, fmt.Errorf("handoff: want one descriptor, got %d (truncated: %v)", len(fds), flags&unix.MSG_CTRUNC != 0)
	case n == 0:
		unix.Close(fds[0])
		return 0, -1, fmt.Errorf("handoff: closed without a message: %w", io.ErrUnexpectedEOF)
	}
	return n, fds[0], nil
}
