package network

import (
	"errors"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// How the watch paces refreshes of the always-blocked set: a burst of
// changes (an interface coming up brings addresses and several routes) is
// read once, settle after its first message; a refresh that fails is
// tried again after retryMin, doubling up to retryMax.
const (
	settle   = 50 * time.Millisecond
	retryMin = time.Second
	retryMax = 30 * time.Second
)

// watchHost keeps the always-blocked set current for as long as boxd
// runs: the host's addresses and routes can change at any time (DHCP, a
// VPN, an interface coming up), not only when a sandbox attaches.
func (m *Manager) watchHost() {
	for {
		err := m.watchOnce()
		m.log.Warn("network: watch of the host's addresses and routes ended; subscribing again", "err", err)
		time.Sleep(retryMin)
	}
}

// watchOnce subscribes to the host's address and route changes and
// refreshes the set after each, until a subscription ends (its socket
// failed, e.g. ENOBUFS when messages were lost).
func (m *Manager) watchOnce() error {
	done := make(chan struct{})
	addrs := make(chan netlink.AddrUpdate, 256)
	routes := make(chan netlink.RouteUpdate, 256)
	defer func() {
		close(done)
		// The library's readers block on a full channel: drain until
		// they close them.
		go func() {
			for range addrs {
			}
		}()
		go func() {
			for range routes {
			}
		}()
	}()
	onErr := func(err error) { m.log.Debug("network: netlink watch", "err", err) }
	if err := netlink.AddrSubscribeWithOptions(addrs, done, netlink.AddrSubscribeOptions{
		ErrorCallback: onErr, ReceiveBufferSize: 1 << 20}); err != nil {
		return err
	}
	if err := netlink.RouteSubscribeWithOptions(routes, done, netlink.RouteSubscribeOptions{
		ErrorCallback: onErr, ReceiveBufferSize: 1 << 20}); err != nil {
		return err
	}
	v6 := m.IPv6()
	// What changed before the subscriptions took effect is read now.
	var due <-chan time.Time = time.After(0)
	retry := retryMin
	for {
		select {
		case u, ok := <-addrs:
			if !ok {
				return errors.New("address subscription closed")
			}
			if due == nil && (u.LinkAddress.IP.To4() != nil || v6) {
				due = time.After(settle)
			}
		case u, ok := <-routes:
			if !ok {
				return errors.New("route subscription closed")
			}
			if due == nil && routeMatters(u.Route, v6) {
				due = time.After(settle)
			}
		case <-due:
			due = nil
			if err := m.refreshBlocked(); err != nil {
				m.log.Warn("network: refresh the always-blocked set", "err", err, "retry in", retry)
				due = time.After(retry)
				retry = min(2*retry, retryMax)
				continue
			}
			retry = retryMin
		}
	}
}

// routeMatters says whether a change of r can change the always-blocked
// set: a route of the host's own addresses (IPv6 ones with v6), or an
// IPv4 one to a private network. The churn of public routes (a full
// routing table) is ignored.
func routeMatters(r netlink.Route, v6 bool) bool {
	if r.Family == netlink.FAMILY_V6 && v6 {
		return r.Type != unix.RTN_UNICAST
	}
	if r.Family != netlink.FAMILY_V4 {
		return false
	}
	if r.Type != unix.RTN_UNICAST {
		return true
	}
	dst := ipNetPrefix(r.Dst)
	return dst.IsValid() && dst.Bits() > 0 && private(dst)
}
