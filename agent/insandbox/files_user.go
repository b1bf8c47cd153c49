package insandbox

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/boxd-dev/boxd/agent/wire"
)

// fsIdentity is a resolved user for file operations.
type fsIdentity struct {
	uid, gid uint32
	groups   []uint32 // supplementary groups, primary gid included
}

// fsMaxGroups bounds the supplementary groups taken from a hostile
// /etc/group; the kernel's own limit (NGROUPS_MAX) is 65536.
const fsMaxGroups = 256

type fsPasswdEntry struct {
	name     string
	uid, gid uint32
}

type fsGroupEntry struct {
	name    string
	gid     uint32
	members []string
}

// fsParsePasswd reads /etc/passwd lines (name:pw:uid:gid:gecos:home:shell).
// The file belongs to the sandbox, so malformed lines are skipped, never
// trusted.
func fsParsePasswd(data []byte) []fsPasswdEntry {
	var out []fsPasswdEntry
	for line := range bytes.Lines(data) {
		f := strings.Split(strings.TrimRight(string(line), "\r\n"), ":")
		if len(f) < 4 || f[0] == "" || strings.HasPrefix(f[0], "#") {
			continue
		}
		uid, ok1 := wire.ParseAccountID(f[2])
		gid, ok2 := wire.ParseAccountID(f[3])
		if ok1 && ok2 {
			out = append(out, fsPasswdEntry{name: f[0], uid: uid, gid: gid})
		}
	}
	return out
}

// fsParseGroup reads /etc/group lines (name:pw:gid:member,member).
func fsParseGroup(data []byte) []fsGroupEntry {
	var out []fsGroupEntry
	for line := range bytes.Lines(data) {
		f := strings.Split(strings.TrimRight(string(line), "\r\n"), ":")
		if len(f) < 3 || f[0] == "" || strings.HasPrefix(f[0], "#") {
			continue
		}
		gid, ok := wire.ParseAccountID(f[2])
		if !ok {
			continue
		}
		e := fsGroupEntry{name: f[0], gid: gid}
		if len(f) > 3 && f[3] != "" {
			e.members = strings.Split(f[3], ",")
		}
		out = append(out, e)
	}
	return out
}

// fsResolveUser turns a user spec into ids with the rules docker and runc
// use (and exec's user does): a numeric user need not exist; its primary
// group is the one in /etc/passwd, or 0 if it has no entry. Unless a group
// is given, the groups listing the user's name are added to the primary
// one. A nil identity means the init's own (root).
func fsResolveUser(spec string, passwd, group []byte) (*fsIdentity, error) {
	if spec == "" {
		return nil, nil
	}
	user, grp, err := wire.ParseUserSpec(spec)
	if err != nil {
		return nil, err
	}
	var id fsIdentity
	name := ""
	users := fsParsePasswd(passwd)
	if uid, ok := wire.ParseAccountID(user); ok {
		id.uid = uid
		for _, e := range users {
			if e.uid == uid {
				name, id.gid = e.name, e.gid
				break
			}
		}
	} else {
		i := slices.IndexFunc(users, func(e fsPasswdEntry) bool { return e.name == user })
		if i < 0 {
			return nil, fmt.Errorf("%w: user: no user %q in the sandbox's /etc/passwd", wire.ErrInvalid, user)
		}
		name, id.uid, id.gid = user, users[i].uid, users[i].gid
	}
	groups := fsParseGroup(group)
	if grp != "" {
		if gid, ok := wire.ParseAccountID(grp); ok {
			id.gid = gid
		} else {
			i := slices.IndexFunc(groups, func(e fsGroupEntry) bool { return e.name == grp })
			if i < 0 {
				return nil, fmt.Errorf("%w: user: no group %q in the sandbox's /etc/group", wire.ErrInvalid, grp)
			}
			id.gid = groups[i].gid
		}
	}
	id.groups = []uint32{id.gid}
	if name != "" && grp == "" {
		for _, g := range groups {
			if len(id.groups) >= fsMaxGroups {
				break
			}
			if slices.Contains(g.members, name) && !slices.Contains(id.groups, g.gid) {
				id.groups = append(id.groups, g.gid)
			}
		}
	}
	if id.uid == 0 && id.gid == 0 {
		return nil, nil
	}
	return &id, nil
}

func (id *fsIdentity) String() string {
	if id == nil {
		return "root"
	}
	return fmt.Sprintf("uid %d gid %d", id.uid, id.gid)
}
