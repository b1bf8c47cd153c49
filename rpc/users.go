//go:build linux

package rpc

import (
	"fmt"
	"os/user"
	"strconv"
	"sync"

	"github.com/containerd/errdefs"
)

// userNames caches uid -> user name for the owner column; a uid the host
// does not know is shown by number.
var userNames sync.Map

func userName(uid uint32) string {
	if v, ok := userNames.Load(uid); ok {
		return v.(string)
	}
	name := ""
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		name = u.Username
	}
	userNames.Store(uid, name)
	return name
}

// lookupOwner reads an owner filter: a numeric uid or a user name the host
// knows.
func lookupOwner(s string) (uint32, error) {
	if v, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(v), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("owner: no user %q on this host (give a user name or a numeric uid): %w", s, errdefs.ErrInvalidArgument)
	}
	v, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("owner: user %q has uid %q: %w", s, u.Uid, errdefs.ErrInvalidArgument)
	}
	return uint32(v), nil
}
