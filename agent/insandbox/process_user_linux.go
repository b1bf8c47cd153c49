//go:build linux

package insandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/boxd-dev/boxd/agent/wire"
)

// execUser is a resolved user a command runs as.
type execUser struct {
	uid, gid uint32
	groups   []uint32 // supplementary groups
	home     string   // from /etc/passwd; "/" if the user has no entry
}

// maxUserSpec bounds a user spec; maxExecGroups bounds the supplementary
// groups taken from the sandbox's /etc/group (NGROUPS_MAX is 65536).
const (
	maxUserSpec   = 256
	maxExecGroups = 256
	// maxAccountFile bounds how much of /etc/passwd or /etc/group is read:
	// both belong to the sandbox.
	maxAccountFile = 4 << 20
)

// Where accounts are looked up; the init reads its own root, which is the
// sandbox's. Variables so that tests can point elsewhere.
var (
	passwdPath = "/etc/passwd"
	groupPath  = "/etc/group"
)

// lookupExecUser resolves NAME, UID, NAME:GROUP or UID:GID with docker's
// and runc's rules: a numeric user need not exist, and its primary group is
// the one in /etc/passwd or 0 without an entry; supplementary groups are
// those listing the user by name, unless a group is given explicitly.
func lookupExecUser(spec string) (*execUser, error) {
	if len(spec) > maxUserSpec {
		return nil, fmt.Errorf("%w: user: %d bytes, at most %d", wire.ErrInvalid, len(spec), maxUserSpec)
	}
	user, group, hasGroup := strings.Cut(spec, ":")
	if !wire.ValidAccountName(user) || (hasGroup && !wire.ValidAccountName(group)) {
		return nil, fmt.Errorf("%w: user: %q is not NAME, UID, NAME:GROUP or UID:GID", wire.ErrInvalid, spec)
	}
	u := &execUser{home: "/"}
	name := ""
	uid, numeric := wire.ParseAccountID(user)
	found := false
	err := scanAccounts(passwdPath, func(f []string) bool {
		if len(f) < 6 {
			return true
		}
		id, ok1 := wire.ParseAccountID(f[2])
		gid, ok2 := wire.ParseAccountID(f[3])
		if !ok1 || !ok2 || (numeric && id != uid) || (!numeric && f[0] != user) {
			return true
		}
		name, u.uid, u.gid, u.home, found = f[0], id, gid, f[5], true
		return false
	})
	if err != nil {
		return nil, err
	}
	switch {
	case numeric && !found:
		u.uid = uid
	case !found:
		return nil, fmt.Errorf("%w: user: no user %q in the sandbox's %s", wire.ErrInvalid, user, passwdPath)
	}
	if u.home == "" {
		u.home = "/"
	}
	if hasGroup {
		gid, ok := wire.ParseAccountID(group)
		if !ok {
			found := false
			err := scanAccounts(groupPath, func(f []string) bool {
				if len(f) < 3 || f[0] != group {
					return true
				}
				gid, found = wire.ParseAccountID(f[2])
				return !found
			})
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, fmt.Errorf("%w: user: no group %q in the sandbox's %s", wire.ErrInvalid, group, groupPath)
			}
		}
		u.gid = gid
		return u, nil
	}
	if name != "" {
		err := scanAccounts(groupPath, func(f []string) bool {
			if len(u.groups) >= maxExecGroups {
				return false
			}
			if len(f) < 4 {
				return true
			}
			gid, ok := wire.ParseAccountID(f[2])
			if ok && gid != u.gid && slices.Contains(strings.Split(f[3], ","), name) && !slices.Contains(u.groups, gid) {
				u.groups = append(u.groups, gid)
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	return u, nil
}

// credential is what ForkExec needs to switch to u.
func (u *execUser) credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
}

// scanAccounts calls fn with the colon-separated fields of each line of an
// account file until fn returns false. A missing file has no lines.
func scanAccounts(path string, fn func(fields []string) bool) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxAccountFile))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if !fn(strings.Split(line, ":")) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
