// Package instance derives every host-global name of one boxd from its
// instance name (boxd --instance NAME), so several boxds share a host
// without sharing anything: containerd namespace, cgroup parent, uid
// blocks, bridge, subnet, resolver address, CNI network and cache,
// nftables tables, state directory and sockets.
//
// The default instance (name "" or "default") has the names boxd always
// had. The package imports no os, time or fmt: boxctl's small front binary
// links it to find an instance's socket and must start in a few
// milliseconds.
package instance

import (
	"errors"
	"hash/fnv"
	"strconv"
)

// Default is the name of the instance boxd runs as without --instance.
const Default = "default"

// MaxLen is the longest instance name: the bridge, "boxd-" + NAME, must
// fit an interface name (IFNAMSIZ 16 with its NUL).
const MaxLen = 10

// Names are one instance's host-global names.
type Names struct {
	Instance  string // "default" or NAME
	Namespace string // containerd namespace
	// CgroupParent is the cgroup every sandbox's sits under; the runtime
	// derives it from the namespace ("/" + namespace).
	CgroupParent string
	StateDir     string
	Socket       string // the API's Unix socket
	SocketDir    string // where Socket and Listener's sockets live
	Bridge       string // also the CNI network's name
	Subnet       string // IPv4 network of egress sandboxes
	Resolver     string // gateway:53, where egress sandboxes' DNS goes
	NftTable     string // name of the inet and bridge tables
	CNINetwork   string
	// CNICacheDir is libcni's cache directory (results/ under it).
	CNICacheDir string
	// UIDBase is the first host uid/gid of the sandboxes' blocks.
	UIDBase uint32
	// Slot is what Subnet and UIDBase are taken from: 0 for the default
	// instance, 1 to Slots for the others. Two names may share a slot;
	// boxd refuses to start a second instance on a slot in use.
	Slot int
}

// Slots is how many slots instances other than the default hash to: as
// many uid spans of UIDSpan as fit above the default's in 32 bits.
const Slots = 62

// UIDSpan is the uids each slot owns: the default --userns-ranges (1024)
// blocks of the default --userns-size (65536).
const UIDSpan = 1024 * 65536

// The default instance's names: what boxd used before instances.
const (
	defaultUIDBase = 200000
	defaultSocket  = "/run/boxd/boxd.sock"
)

// Listener is where a later listener of kind (e.g. "mcp") of this
// instance puts its Unix socket, next to the API's.
func (n Names) Listener(kind string) string { return n.SocketDir + "/" + kind + ".sock" }

// Check says what is wrong with name, or nil: 1 to MaxLen characters of
// a-z, 0-9 and '-', starting with a letter or digit.
func Check(name string) error {
	if name == "" || name == Default {
		return nil
	}
	if len(name) > MaxLen {
		return errors.New("instance name " + strconv.Quote(name) + ": longer than " + strconv.Itoa(MaxLen) + " characters (its bridge, boxd-NAME, must fit an interface name)")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) {
			return errors.New("instance name " + strconv.Quote(name) + ": only a-z, 0-9 and '-' (not first) are allowed")
		}
	}
	return nil
}

// Socket is the API socket of instance name, for clients; "" is the
// default instance. An invalid name gives "".
func Socket(name string) string {
	n, err := Derive(name)
	if err != nil {
		return ""
	}
	return n.Socket
}

// Derive gives instance name's names ("" or "default": today's defaults).
func Derive(name string) (Names, error) {
	if err := Check(name); err != nil {
		return Names{}, err
	}
	if name == "" || name == Default {
		return Names{
			Instance: Default, Namespace: "boxd", CgroupParent: "/boxd",
			StateDir: "/var/lib/boxd", Socket: defaultSocket, SocketDir: "/run/boxd",
			Bridge: "boxd0", Subnet: "10.213.0.0/16", Resolver: "10.213.0.1:53",
			NftTable: "boxd", CNINetwork: "boxd0", CNICacheDir: "/var/lib/cni",
			UIDBase: defaultUIDBase,
		}, nil
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	slot := 1 + int(h.Sum32()%Slots)
	// Slot s owns 10.216.0.0/14's s-th /20 (4093 sandboxes) and the uids
	// [200000 + s*UIDSpan, 200000 + (s+1)*UIDSpan): both clear of the
	// default instance's 10.213.0.0/16 and first span.
	second, third := 216+slot/16, (slot%16)*16
	net := "10." + strconv.Itoa(second) + "." + strconv.Itoa(third) + "."
	full := "boxd-" + name
	state := "/var/lib/" + full
	return Names{
		Instance: name, Namespace: full, CgroupParent: "/" + full,
		StateDir: state, Socket: "/run/" + full + "/boxd.sock", SocketDir: "/run/" + full,
		Bridge: full, Subnet: net + "0/20", Resolver: net + "1:53",
		NftTable: full, CNINetwork: full, CNICacheDir: state + "/network/cni",
		UIDBase: uint32(defaultUIDBase + slot*UIDSpan),
		Slot:    slot,
	}, nil
}
