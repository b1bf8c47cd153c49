package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The deny log's view of refused connections comes from the kernel's
// nfnetlink_log: each rule of boxd's that rejects a new connection is
// preceded by one that logs it to a netlink group of boxd's own, behind a
// per-rule rate limit (nft.go), with the first bytes of the packet only
// (nflogSnaplen: its IP header and ports). boxd reads that group on one
// socket. The kernel drops what boxd's socket buffer cannot hold (boxd
// counts ENOBUFS as lost), so nothing a sandbox sends can grow boxd's
// memory, and each message boxd parses is a bounded netlink datagram.

// nfnetlink_log's message types and attributes (linux/netfilter/nfnetlink_log.h).
const (
	nfnlSubsysULOG   = 4
	nfulnlMsgPacket  = 0
	nfulnlMsgConfig  = 1
	nfulaCfgCmd      = 1
	nfulaCfgMode     = 2
	nfulaPayload     = 9
	nfulaPrefix      = 10
	nfulnlCfgBind    = 1
	nfulnlCopyPacket = 2
)

// nflogSnaplen is how much of each refused packet the kernel copies: an
// IPv4 header with options (60) or an IPv6 header (40), plus the ports.
const nflogSnaplen = 64

// nflogGroup is the nfnetlink_log group of the boxd whose tables are
// table: derived from the name, so boxds side by side (--instance) each
// have their own.
func nflogGroup(table string) uint16 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(table))
	return uint16(20000 + h.Sum32()%20000)
}

// Reasons a refusal is recorded with.
const (
	ReasonNotAllowed     = "not_allowed"      // no allowlist entry lets it through
	ReasonBlocked        = "blocked"          // the always-blocked set
	ReasonHost           = "host"             // the host itself (anything but its resolver)
	ReasonNameNotAllowed = "name_not_allowed" // a DNS name outside the allowlist
	ReasonUnrecorded     = "unrecorded"       // refusals past the per-window bound, counted only
)

// DenyReasons are every Reason a DenyRecord can carry.
var DenyReasons = []string{ReasonNotAllowed, ReasonBlocked, ReasonHost, ReasonNameNotAllowed, ReasonUnrecorded}

// nflogPrefixes are the log prefixes of boxd's rules, one per reason.
var nflogPrefixes = map[string]string{"N": ReasonNotAllowed, "B": ReasonBlocked, "H": ReasonHost}

// nflogReader is the socket bound to boxd's group.
type nflogReader struct {
	c     *netlink.Conn
	group uint16
}

// openNFLog binds group with packet copies of nflogSnaplen bytes.
func openNFLog(group uint16) (*nflogReader, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("nflog: %w", err)
	}
	// Room for a few thousand messages; past it the kernel drops.
	_ = c.SetReadBuffer(1 << 20)
	cfg := func(attrs []netlink.Attribute) error {
		b, err := netlink.MarshalAttributes(attrs)
		if err != nil {
			return err
		}
		hdr := []byte{unix.AF_UNSPEC, 0, 0, 0}
		binary.BigEndian.PutUint16(hdr[2:], group)
		_, err = c.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysULOG<<8 | nfulnlMsgConfig),
				Flags: netlink.Request | netlink.Acknowledge},
			Data: append(hdr, b...),
		})
		return err
	}
	mode := binary.BigEndian.AppendUint32(nil, nflogSnaplen)
	mode = append(mode, nfulnlCopyPacket, 0)
	if err := cfg([]netlink.Attribute{{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgBind}}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: bind group %d: %w", group, err)
	}
	if err := cfg([]netlink.Attribute{{Type: nfulaCfgMode, Data: mode}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: copy mode of group %d: %w", group, err)
	}
	return &nflogReader{c: c, group: group}, nil
}

// refusal is one refused packet as the kernel logged it.
type refusal struct {
	src, dst netip.Addr
	proto    string // tcp, udp, icmp, icmpv6 or a protocol number
	port     uint16 // 0 without one
	reason   string
}

// run hands each logged refusal to f until the socket fails for good.
// lost is called with how often the kernel dropped messages.
func (r *nflogReader) run(f func(refusal), lost func()) error {
	for {
		msgs, err := r.c.Receive()
		if err != nil {
			var oe *netlink.OpError
			if errors.As(err, &oe) && errors.Is(oe.Err, unix.ENOBUFS) {
				lost()
				continue
			}
			return fmt.Errorf("nflog: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(nfnlSubsysULOG<<8|nfulnlMsgPacket) || len(m.Data) < 4 {
				continue
			}
			if ref, ok := parseNFLog(m.Data[4:]); ok {
				f(ref)
			}
		}
	}
}

// parseNFLog reads one packet message's attributes (after its nfgenmsg).
func parseNFLog(b []byte) (refusal, bool) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return refusal{}, false
	}
	var payload []byte
	var prefix string
	for ad.Next() {
		switch ad.Type() {
		case nfulaPayload:
			payload = ad.Bytes()
		case nfulaPrefix:
			prefix = ad.String()
		}
	}
	reason, ok := nflogPrefixes[prefix]
	if ad.Err() != nil || !ok {
		return refusal{}, false
	}
	ref, ok := parsePacket(payload)
	ref.reason = reason
	return ref, ok
}

// parsePacket reads addresses, protocol and destination port from the
// start of an IPv4 or IPv6 packet (extension headers are not followed).
func parsePacket(p []byte) (refusal, bool) {
	var ref refusal
	var proto byte
	var l4 []byte
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		ihl := int(p[0]&0x0f) * 4
		if ihl < 20 || len(p) < ihl {
			return ref, false
		}
		ref.src = netip.AddrFrom4([4]byte(p[12:16]))
		ref.dst = netip.AddrFrom4([4]byte(p[16:20]))
		proto, l4 = p[9], p[ihl:]
	case len(p) >= 40 && p[0]>>4 == 6:
		ref.src = netip.AddrFrom16([16]byte(p[8:24]))
		ref.dst = netip.AddrFrom16([16]byte(p[24:40]))
		proto, l4 = p[6], p[40:]
	default:
		return ref, false
	}
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
		ref.proto = map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp"}[proto]
		if len(l4) >= 4 {
			ref.port = binary.BigEndian.Uint16(l4[2:4])
		}
	case unix.IPPROTO_ICMP:
		ref.proto = "icmp"
	case unix.IPPROTO_ICMPV6:
		ref.proto = "icmpv6"
	default:
		ref.proto = fmt.Sprint(proto)
	}
	return ref, true
}

// watchDenials reads the kernel's log of refusals into the deny log for
// as long as boxd runs, binding again after a failure.
func (m *Manager) watchDenials(r *nflogReader) {
	for {
		err := r.run(func(ref refusal) {
			mb := m.member(ref.src)
			if mb == nil {
				return // a sandbox that is gone, or not one of boxd's
			}
			m.deny.add(mb.id, DenyRecord{Dest: ref.dst.String(), Port: ref.port, Proto: ref.proto, Reason: ref.reason})
		}, m.deny.lostOne)
		m.log.Warn("network: deny log reader ended; binding again", "err", err)
		r.c.Close()
		for {
			time.Sleep(retryMin)
			var oerr error
			if r, oerr = openNFLog(r.group); oerr == nil {
				break
			}
			m.log.Warn("network: deny log", "err", oerr)
		}
	}
}
