//go:build linux

// Package gvchannel is boxd's channel to the init of a gVisor sandbox,
// where the runc sandboxes' hand-off (agent/handoff) cannot work.
//
// Under runc, boxd makes the agent's listening socket on the host and hands
// its descriptor to the init (SCM_RIGHTS). gVisor's Sentry imports a host
// socket it receives that way as a connected endpoint, on which accept
// fails (pkg/sentry/fsimpl/host newEndpoint -> transport.NewExternal;
// connectionedEndpoint.Accept: ErrInvalidEndpointState); and the init's
// connect to a host socket arrives from runsc's gofer, not from the init's
// pid, so SO_PEERCRED cannot single the init out. So under gVisor the
// direction is turned round:
//
//   - boxd writes the init's Config to a file (ConfigName) in the hand-off
//     directory, which is host root's and mounted read-only: the sandbox
//     can read it (as its root) and never change it.
//   - boxd makes an agent directory (Prepare), owned by the sandbox root's
//     host uid and 0700, mounted read-write at wire.AgentDir; the init binds
//     the agent socket (SocketName) there and runsc's gofer makes it a host
//     socket (runsc --host-uds=create).
//   - boxd treats that directory as hostile: it never follows a path in it.
//     Dial opens the socket with O_PATH|O_NOFOLLOW relative to the
//     directory, checks that it is a socket of the sandbox root's uid on the
//     directory's own filesystem, and connects through /proc/self/fd/N, so a
//     symlink (to containerd's socket, say) or anything but a socket is
//     refused before any connect. The sandbox root's uid is boxd's own
//     record (the sandbox's uid block), kept in the pin: never the
//     directory's owner, which the sandbox's root can chown.
//   - boxd pins the socket the init bound: when a sandbox's init starts,
//     nothing else runs in the sandbox until boxd has talked to the init
//     (commands start only through it), so the first socket there is the
//     init's. Its identity (device, inode, change time) is kept in a host
//     file only host root can reach (WritePin), and every Dial refuses a
//     socket that is not that one: code in the sandbox that replaces it,
//     even as the sandbox's root, gets no connection from boxd.
package gvchannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// SocketName is the agent socket's name in the agent directory.
const SocketName = "agent.sock"

// ConfigName is the init's Config file in the hand-off directory.
const ConfigName = "config.json"

// ErrRefused is wrapped by Dial's errors for an entry that is not the
// pinned agent socket.
var ErrRefused = errors.New("gvchannel: refused")

// Pin identifies one socket file, and the host uid (the sandbox root's,
// from boxd's record of the sandbox) that must own it.
type Pin struct {
	Dev       uint64 `json:"dev"`
	Ino       uint64 `json:"ino"`
	CtimeSec  int64  `json:"ctime_sec"`
	CtimeNsec int64  `json:"ctime_nsec"`
	// UID is 0 in a pin written before boxd recorded it; Dial refuses
	// such a pin (the caller supplies the uid from the sandbox's record,
	// WithUID).
	UID uint32 `json:"uid,omitempty"`
}

// WithUID is pin with the owner uid set (for a pin that lacks it).
func (p Pin) WithUID(uid uint32) Pin { p.UID = uid; return p }

// Prepare makes dir (whose parent must be host root's) the agent directory
// of a sandbox whose root is uid:gid on the host, removing the socket and
// pin a previous init left. pinPath is the pin's file.
func Prepare(dir, pinPath string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("gvchannel: agent dir: %w", err)
	}
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("gvchannel: open agent dir %s: %w", dir, err)
	}
	defer unix.Close(d)
	if err := unix.Fchown(d, uid, gid); err != nil {
		return fmt.Errorf("gvchannel: chown %s: %w", dir, err)
	}
	if err := unix.Fchmod(d, 0o700); err != nil {
		return fmt.Errorf("gvchannel: chmod %s: %w", dir, err)
	}
	// unlinkat never follows: whatever the sandbox left under the name goes.
	if err := unix.Unlinkat(d, SocketName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("gvchannel: remove old socket: %w", err)
	}
	if err := os.Remove(pinPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("gvchannel: remove old pin: %w", err)
	}
	return nil
}

// WriteConfig writes the init's Config (encoded) into the hand-off
// directory dir (host root's, mounted read-only), readable by the
// sandbox's root only.
func WriteConfig(dir string, body []byte, uid, gid int) error {
	path := filepath.Join(dir, ConfigName)
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o400)
	if err != nil {
		return fmt.Errorf("gvchannel: config: %w", err)
	}
	_, werr := f.Write(body)
	if err := f.Chown(uid, gid); err != nil && werr == nil {
		werr = err
	}
	if err := f.Close(); err != nil && werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("gvchannel: config: %w", werr)
	}
	return nil
}

func openDir(dir string) (int, error) {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("gvchannel: open agent dir %s: %w", dir, err)
	}
	return d, nil
}

// open opens the socket entry in dir without following anything and
// checks it: a socket, owned by uid, on dir's filesystem. It returns the
// O_PATH descriptor and the socket's identity.
func open(dir string, uid uint32) (int, Pin, error) {
	d, err := openDir(dir)
	if err != nil {
		return -1, Pin{}, err
	}
	defer unix.Close(d)
	var dst unix.Stat_t
	if err := unix.Fstat(d, &dst); err != nil {
		return -1, Pin{}, fmt.Errorf("gvchannel: stat agent dir: %w", err)
	}
	fd, err := unix.Openat(d, SocketName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, Pin{}, fmt.Errorf("gvchannel: agent socket: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, Pin{}, fmt.Errorf("gvchannel: stat agent socket: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		err = fmt.Errorf("%w: %s in the agent directory is not a socket (mode %#o)", ErrRefused, SocketName, st.Mode)
	case st.Uid != uid:
		err = fmt.Errorf("%w: %s is host uid %d's, want the sandbox root's %d", ErrRefused, SocketName, st.Uid, uid)
	case st.Dev != dst.Dev:
		err = fmt.Errorf("%w: %s is on another filesystem than the agent directory", ErrRefused, SocketName)
	}
	if err != nil {
		unix.Close(fd)
		return -1, Pin{}, err
	}
	return fd, Pin{Dev: st.Dev, Ino: st.Ino, CtimeSec: st.Ctim.Sec, CtimeNsec: st.Ctim.Nsec, UID: uid}, nil
}

// Find reports the identity of the socket now in dir, if it is one of
// uid's (see the package comment for when that is the init's); uid is the
// sandbox root's host uid as boxd recorded it.
func Find(dir string, uid uint32) (Pin, error) {
	fd, pin, err := open(dir, uid)
	if err != nil {
		return Pin{}, err
	}
	unix.Close(fd)
	return pin, nil
}

// WritePin records pin at path (in a host-root-only directory).
func WritePin(path string, pin Pin) error {
	b, _ := json.Marshal(pin)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("gvchannel: pin: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("gvchannel: pin: %w", err)
	}
	return nil
}

// ReadPin reads the pin WritePin recorded.
func ReadPin(path string) (Pin, error) {
	var pin Pin
	b, err := os.ReadFile(path)
	if err != nil {
		return pin, fmt.Errorf("gvchannel: pin: %w", err)
	}
	if err := json.Unmarshal(b, &pin); err != nil {
		return pin, fmt.Errorf("gvchannel: pin %s: %w", path, err)
	}
	return pin, nil
}

// Dial connects to the socket in dir if it is the pinned one, owned by
// the pin's uid. Whoever owns dir does not matter.
func Dial(ctx context.Context, dir string, pin Pin) (net.Conn, error) {
	if pin.UID == 0 {
		return nil, fmt.Errorf("%w: the pin names no owner uid", ErrRefused)
	}
	fd, got, err := open(dir, pin.UID)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if got != pin {
		return nil, fmt.Errorf("%w: %s is not the socket the init bound (replaced in the sandbox?)", ErrRefused, SocketName)
	}
	// The kernel resolves the magic link to the very inode checked above.
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("gvchannel: connect: %w", err)
	}
	return c, nil
}
