package network

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The firewall is two tables of boxd's own, never a rule in anyone else's:
//
//	inet <table>   chain forward (hook forward): established → accept;
//	                    from the bridge → jump from_sandbox
//	               chain input (hook input): from the bridge → jump to_host
//	               chain to_host: established → accept; DNS to the gateway → accept;
//	                    reject (every other address of the host, broadcast and
//	                    multicast included: those arrive on the bridge as input)
//	               chain from_sandbox: ip saddr A → jump sb_ID, and with IPv6
//	                    ip6 saddr A6 → jump sb_ID (rules per sandbox, tagged
//	                    with its id); IPv6 → drop; reject
//	               chain sb_ID: the sandbox's CIDRs → accept; @blocked (@blocked6)
//	                    → log, reject; @dyn_ID (@dyn6_ID: answers of its resolver)
//	                    → accept; "*" → accept; log; reject
//	               chain postrouting (nat): from the subnet (and subnet6), not to
//	                    the bridge → masquerade
//	               sets blocked, blocked6: the always-blocked destinations
//	bridge <table> chain forward: iifname VETH → drop (one rule per sandbox: frames
//	                    from its port to another port of the bridge)
//
// A sandbox's namespace belongs to the host's user namespace, so sandbox
// root has neither CAP_NET_ADMIN nor CAP_NET_RAW there: it cannot change
// its address or forge one, and matching on the source address is sound.

const (
	chainForward   = "forward"
	chainInput     = "input"
	chainToHost    = "to_host"
	chainFromSb    = "from_sandbox"
	chainPost      = "postrouting"
	setBlocked     = "blocked"
	setBlocked6    = "blocked6"
	sbChainPrefix  = "sb_"
	dynSetPrefix   = "dyn_"
	dynPSetPrefix  = "dynp_"
	dyn6SetPrefix  = "dyn6_"
	dynP6SetPrefix = "dynp6_"
	tagPrefix      = "boxd:"
)

type firewall struct {
	table  string
	group  uint16 // nfnetlink_log group of the deny log
	bridge string
	subnet netip.Prefix
	gw     netip.Addr
	// subnet6 is the sandboxes' IPv6 network; invalid without IPv6.
	subnet6 netip.Prefix
	// broker: the secret broker listens on the gateway's 80 and 443.
	broker bool
}

// ipFamily is what the rules of one IP family differ in.
type ipFamily struct {
	match   []expr.Any // meta nfproto
	portReg uint32     // the register after the address, in a concatenation
	blocked string     // the always-blocked set
	dyn     string     // prefixes of the sandbox's sets of resolver answers
	dynp    string
	keyType nftables.SetDatatype
}

var (
	fam4 = ipFamily{match: ipv4(), portReg: 9, blocked: setBlocked, dyn: dynSetPrefix, dynp: dynPSetPrefix, keyType: nftables.TypeIPAddr}
	fam6 = ipFamily{match: ipv6(), portReg: 12, blocked: setBlocked6, dyn: dyn6SetPrefix, dynp: dynP6SetPrefix, keyType: nftables.TypeIP6Addr}
)

// families are the IP families of a sandbox: IPv4, and IPv6 with v6.
func families(v6 bool) []ipFamily {
	if v6 {
		return []ipFamily{fam4, fam6}
	}
	return []ipFamily{fam4}
}

// dynSets are sandbox id's sets of resolver answers in family fm.
func (f *firewall) dynSets(id string, fm ipFamily) (dyn, dynp *nftables.Set) {
	t := f.inet()
	dyn = &nftables.Set{Table: t, Name: fm.dyn + id, KeyType: fm.keyType, HasTimeout: true}
	dynp = &nftables.Set{Table: t, Name: fm.dynp + id, KeyType: nftables.MustConcatSetType(fm.keyType, nftables.TypeInetService),
		Concatenation: true, HasTimeout: true}
	return dyn, dynp
}

func (f *firewall) inet() *nftables.Table {
	return &nftables.Table{Name: f.table, Family: nftables.TableFamilyINet}
}
func (f *firewall) bridgeTable() *nftables.Table {
	return &nftables.Table{Name: f.table, Family: nftables.TableFamilyBridge}
}
func (f *firewall) chain(name string) *nftables.Chain {
	return &nftables.Chain{Name: name, Table: f.inet()}
}

func conn() (*nftables.Conn, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return c, nil
}

// ensure creates boxd's tables if they are missing; rewrite says to write
// the to_host chain again in tables that exist (once per process: tables
// an older boxd made keep their rules across its restart). The
// always-blocked set starts empty; every install refreshes it, in its own
// transaction, before any sandbox's traffic can reach it (until then
// nothing is accepted from the bridge).
func (f *firewall) ensure(rewrite bool) error {
	c, err := conn()
	if err != nil {
		return err
	}
	if _, err := c.ListTableOfFamily(f.table, nftables.TableFamilyINet); err != nil {
		return f.create(c)
	}
	if !rewrite {
		return nil
	}
	toHost := f.chain(chainToHost)
	c.FlushChain(toHost)
	f.toHostRules(c, toHost)
	// Tables an older boxd made have no IPv6 set or NAT.
	if err := c.AddSet(blockedSetOf(f.inet(), fam6), nil); err != nil {
		return fmt.Errorf("nftables: blocked6 set: %w", err)
	}
	post := f.chain(chainPost)
	c.FlushChain(post)
	f.postRules(c, post)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: rules of %s: %w", chainToHost, err)
	}
	return nil
}

// toHostRules fills the to_host chain: what a sandbox sends to the host
// itself. Only DNS to the gateway (boxd's resolver) is let in; every other
// address and port of the host, and broadcast and multicast (which the
// host takes in on the bridge), is refused whatever the sandbox's
// allowlist says.
func (f *firewall) toHostRules(c *nftables.Conn, toHost *nftables.Chain) {
	add := func(e ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: toHost.Table, Chain: toHost, Exprs: slices.Concat(e...)})
	}
	add(established(), verdict(expr.VerdictAccept))
	for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
		add(ipv4(), daddrIs(f.gw), l4proto(proto), dport(53), verdict(expr.VerdictAccept))
	}
	// The secret broker (broker.go), only while it holds the ports: it
	// refuses sandboxes it has no secret of.
	for _, p := range []uint16{80, 443} {
		if f.broker {
			add(ipv4(), daddrIs(f.gw), l4proto(unix.IPPROTO_TCP), dport(p), verdict(expr.VerdictAccept))
		}
	}
	// IPv6 neighbour discovery (solicitations and advertisements): what
	// ARP is to IPv4, which the inet table never sees.
	for _, typ := range []byte{135, 136} {
		add(ipv6(), l4proto(unix.IPPROTO_ICMPV6), []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{typ}},
		}, verdict(expr.VerdictAccept))
	}
	add(f.logRefusal("H"))
	add(reject())
}

// blockedSetOf is the always-blocked set of table t for family fm.
func blockedSetOf(t *nftables.Table, fm ipFamily) *nftables.Set {
	return &nftables.Set{Table: t, Name: fm.blocked, KeyType: fm.keyType, Interval: true}
}

// fillBlocked queues the replacement of the always-blocked sets' elements
// (IPv4 and IPv6) on c: committed with c's other changes, in one
// transaction.
func (f *firewall) fillBlocked(c *nftables.Conn, blocked []netip.Prefix) error {
	for _, fm := range families(true) {
		set := blockedSetOf(f.inet(), fm)
		c.FlushSet(set)
		if err := c.SetAddElements(set, intervalElements(blocked, fm.keyType == nftables.TypeIP6Addr)); err != nil {
			return fmt.Errorf("nftables: %s set: %w", set.Name, err)
		}
	}
	return nil
}

// postRules fills the postrouting chain: NAT (and NAT66) to whatever
// interface the host routes the packet out of.
func (f *firewall) postRules(c *nftables.Conn, post *nftables.Chain) {
	c.AddRule(&nftables.Rule{Table: post.Table, Chain: post,
		Exprs: slices.Concat(ipv4(), saddrIn(f.subnet), oifnameNot(f.bridge), []expr.Any{&expr.Masq{}})})
	if f.subnet6.IsValid() {
		c.AddRule(&nftables.Rule{Table: post.Table, Chain: post,
			Exprs: slices.Concat(ipv6(), saddrIn(f.subnet6), oifnameNot(f.bridge), []expr.Any{&expr.Masq{}})})
	}
}

// setBlocked replaces the always-blocked set.
func (f *firewall) setBlocked(blocked []netip.Prefix) error {
	c, err := conn()
	if err != nil {
		return err
	}
	if err := f.fillBlocked(c, blocked); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: blocked set: %w", err)
	}
	return nil
}

func (f *firewall) create(c *nftables.Conn) error {
	t := c.AddTable(f.inet())
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: chainForward, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	in := c.AddChain(&nftables.Chain{Name: chainInput, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	toHost := c.AddChain(&nftables.Chain{Name: chainToHost, Table: t})
	fromSb := c.AddChain(&nftables.Chain{Name: chainFromSb, Table: t})
	post := c.AddChain(&nftables.Chain{Name: chainPost, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	for _, fm := range families(true) {
		if err := c.AddSet(blockedSetOf(t, fm), nil); err != nil {
			return fmt.Errorf("nftables: %s set: %w", fm.blocked, err)
		}
	}

	add := func(ch *nftables.Chain, e ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(e...)})
	}
	// Replies to what a sandbox was allowed to open.
	add(fwd, established(), verdict(expr.VerdictAccept))
	add(fwd, iifname(f.bridge), jump(chainFromSb))
	add(in, iifname(f.bridge), jump(chainToHost))

	f.toHostRules(c, toHost)

	add(fromSb, nfproto(unix.NFPROTO_IPV6), verdict(expr.VerdictDrop))
	add(fromSb, reject())

	f.postRules(c, post)

	// Sandboxes never reach each other: each sandbox's port gets a rule
	// in this chain that drops what it sends across the bridge (install).
	bt := c.AddTable(f.bridgeTable())
	// Priority -200 (NF_BR_PRI_FILTER_BRIDGED), before br_netfilter (0),
	// which re-injects the frames it passes to the IP hooks past every
	// bridge hook of its own priority: a chain at 0 would never see them.
	c.AddChain(&nftables.Chain{Name: chainForward, Table: bt, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityRef(-200), Policy: &accept})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: create table %s: %w", f.table, err)
	}
	return nil
}

// install adds (or, if present, replaces) sandbox id's rules: its jumps in
// from_sandbox (addr6 is invalid without IPv6), its chain and its sets;
// and refreshes the always-blocked sets (the host's addresses can
// change), all in one transaction. fresh says id has no rules yet, which
// spares listing the chains to find them.
func (f *firewall) install(id string, addr, addr6 netip.Addr, veth string, allow []Dest, blocked []netip.Prefix, fresh bool) error {
	c, err := conn()
	if err != nil {
		return err
	}
	t := f.inet()
	if err := f.fillBlocked(c, blocked); err != nil {
		return err
	}
	ch := c.AddChain(&nftables.Chain{Name: sbChainPrefix + id, Table: t})
	v6 := addr6.IsValid()
	for _, fm := range families(v6) {
		dyn, dynp := f.dynSets(id, fm)
		for _, set := range []*nftables.Set{dyn, dynp} {
			if err := c.AddSet(set, nil); err != nil {
				return fmt.Errorf("nftables: set %s: %w", set.Name, err)
			}
		}
	}
	c.FlushChain(ch)
	f.addAllowRules(c, ch, id, allow, v6)
	// The jumps go in only once; a re-install (restart) finds them.
	tagged := func(rules []*nftables.Rule) bool {
		return slices.ContainsFunc(rules, func(r *nftables.Rule) bool { return string(r.UserData) == tagPrefix+id })
	}
	var rules, brules []*nftables.Rule
	bfwd := &nftables.Chain{Name: chainForward, Table: f.bridgeTable()}
	if !fresh {
		if rules, err = c.GetRules(t, f.chain(chainFromSb)); err != nil {
			return fmt.Errorf("nftables: list %s: %w", chainFromSb, err)
		}
		if brules, err = c.GetRules(f.bridgeTable(), bfwd); err != nil {
			return fmt.Errorf("nftables: list bridge %s: %w", chainForward, err)
		}
	}
	if !tagged(rules) {
		c.InsertRule(&nftables.Rule{Table: t, Chain: f.chain(chainFromSb), UserData: []byte(tagPrefix + id),
			Exprs: slices.Concat(ipv4(), saddrIs(addr), jump(ch.Name))})
		if v6 {
			c.InsertRule(&nftables.Rule{Table: t, Chain: f.chain(chainFromSb), UserData: []byte(tagPrefix + id),
				Exprs: slices.Concat(ipv6(), saddrIs(addr6), jump(ch.Name))})
		}
	}
	if veth != "" && !tagged(brules) {
		c.AddRule(&nftables.Rule{Table: f.bridgeTable(), Chain: bfwd, UserData: []byte(tagPrefix + id),
			Exprs: slices.Concat(iifname(veth), verdict(expr.VerdictDrop))})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: rules of sandbox %s: %w", id, err)
	}
	return nil
}

// replaceAllow rewrites sandbox id's chain in one transaction; forget
// also empties the sets of resolver answers (an entry was removed, and
// which answer came from which name is not kept). v6 says id has IPv6.
func (f *firewall) replaceAllow(id string, allow []Dest, forget, v6 bool) error {
	c, err := conn()
	if err != nil {
		return err
	}
	ch := &nftables.Chain{Name: sbChainPrefix + id, Table: f.inet()}
	c.FlushChain(ch)
	if forget {
		for _, fm := range families(v6) {
			dyn, dynp := f.dynSets(id, fm)
			c.FlushSet(dyn)
			c.FlushSet(dynp)
		}
	}
	f.addAllowRules(c, ch, id, allow, v6)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: rules of sandbox %s: %w", id, err)
	}
	return nil
}

// addAllowRules fills sandbox id's chain: its CIDRs, the always-blocked
// sets, the addresses its resolver handed out, "*", then refusal. IPv6
// entries and rules are there only with v6 (without, IPv6 never leaves
// the sandbox).
func (f *firewall) addAllowRules(c *nftables.Conn, ch *nftables.Chain, id string, allow []Dest, v6 bool) {
	t := ch.Table
	add := func(e ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(e...)}) }
	withPort := func(fam, match []expr.Any, port uint16) {
		if port == 0 {
			add(fam, match, verdict(expr.VerdictAccept))
			return
		}
		for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			add(fam, match, l4proto(proto), dport(port), verdict(expr.VerdictAccept))
		}
	}
	// A CIDR the caller named is allowed even inside the blocked set.
	for _, d := range allow {
		switch {
		case d.IsCIDR() && !d.IsIPv6():
			withPort(ipv4(), daddrIn(d.Prefix), d.Port)
		case d.IsIPv6() && v6:
			withPort(ipv6(), daddrIn(d.Prefix), d.Port)
		}
	}
	for _, fm := range families(v6) {
		add(fm.match, lookupDaddr(fm, fm.blocked), f.logRefusal("B"))
		add(fm.match, lookupDaddr(fm, fm.blocked), reject())
		// Addresses the sandbox's resolver handed out for allowed names.
		add(fm.match, lookupDaddr(fm, fm.dyn+id), verdict(expr.VerdictAccept))
		for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			add(fm.match, l4proto(proto), []expr.Any{
				daddrPayload(fm),
				&expr.Payload{DestRegister: fm.portReg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Lookup{SourceRegister: 1, SetName: fm.dynp + id},
			}, verdict(expr.VerdictAccept))
		}
	}
	for _, d := range allow {
		if d.Any {
			for _, fm := range families(v6) {
				withPort(fm.match, nil, d.Port)
			}
		}
	}
	add(f.logRefusal("N"))
	add(reject())
}

// remove deletes everything of sandbox id; missing pieces are fine.
func (f *firewall) remove(id string) error {
	c, err := conn()
	if err != nil {
		return err
	}
	t := f.inet()
	if _, err := c.ListTableOfFamily(f.table, nftables.TableFamilyINet); err != nil {
		return nil // no table, nothing of id's
	}
	rules, err := c.GetRules(t, f.chain(chainFromSb))
	if err != nil {
		return fmt.Errorf("nftables: list %s: %w", chainFromSb, err)
	}
	for _, r := range rules {
		if string(r.UserData) == tagPrefix+id {
			if err := c.DelRule(r); err != nil {
				return fmt.Errorf("nftables: delete jump of %s: %w", id, err)
			}
		}
	}
	brules, err := c.GetRules(f.bridgeTable(), &nftables.Chain{Name: chainForward, Table: f.bridgeTable()})
	if err != nil {
		return fmt.Errorf("nftables: list bridge %s: %w", chainForward, err)
	}
	for _, r := range brules {
		if string(r.UserData) == tagPrefix+id {
			if err := c.DelRule(r); err != nil {
				return fmt.Errorf("nftables: delete bridge rule of %s: %w", id, err)
			}
		}
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("nftables: list chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == f.table && ch.Name == sbChainPrefix+id {
			c.FlushChain(ch)
			c.DelChain(ch)
		}
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return fmt.Errorf("nftables: list sets: %w", err)
	}
	for _, s := range sets {
		for _, p := range []string{dynSetPrefix, dynPSetPrefix, dyn6SetPrefix, dynP6SetPrefix} {
			if s.Name == p+id {
				c.DelSet(s)
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: remove sandbox %s: %w", id, err)
	}
	return nil
}

// ids lists the sandboxes that have rules or sets in the table.
func (f *firewall) ids() ([]string, error) {
	c, err := conn()
	if err != nil {
		return nil, err
	}
	if _, err := c.ListTableOfFamily(f.table, nftables.TableFamilyINet); err != nil {
		return nil, nil
	}
	seen := map[string]bool{}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("nftables: list chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == f.table && strings.HasPrefix(ch.Name, sbChainPrefix) {
			seen[strings.TrimPrefix(ch.Name, sbChainPrefix)] = true
		}
	}
	sets, err := c.GetSets(f.inet())
	if err != nil {
		return nil, fmt.Errorf("nftables: list sets: %w", err)
	}
	for _, s := range sets {
		for _, p := range []string{dynSetPrefix, dynPSetPrefix, dyn6SetPrefix, dynP6SetPrefix} {
			if strings.HasPrefix(s.Name, p) {
				seen[strings.TrimPrefix(s.Name, p)] = true
			}
		}
	}
	rules, err := c.GetRules(f.inet(), f.chain(chainFromSb))
	brules, berr := c.GetRules(f.bridgeTable(), &nftables.Chain{Name: chainForward, Table: f.bridgeTable()})
	if berr == nil {
		rules = append(rules, brules...)
	}
	if err == nil || berr == nil {
		for _, r := range rules {
			if s := string(r.UserData); strings.HasPrefix(s, tagPrefix) {
				seen[strings.TrimPrefix(s, tagPrefix)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// admit adds resolver answers to sandbox id's sets for ttl (IPv6 ones
// only if the caller knows id has IPv6 sets).
func (f *firewall) admit(id string, addrs []netip.Addr, port uint16, ttl time.Duration) error {
	c, err := conn()
	if err != nil {
		return err
	}
	type batch struct {
		set *nftables.Set
		els []nftables.SetElement
	}
	var batches []batch
	for _, fm := range families(true) {
		var els []nftables.SetElement
		for _, a := range addrs {
			if a.Is6() != (fm.keyType == nftables.TypeIP6Addr) {
				continue
			}
			k := a.AsSlice()
			if port != 0 {
				// Concatenated keys are padded to 32-bit registers.
				k = append(k, byte(port>>8), byte(port), 0, 0)
			}
			els = append(els, nftables.SetElement{Key: k, Timeout: ttl})
		}
		set, setp := f.dynSets(id, fm)
		if port != 0 {
			set = setp
		}
		if len(els) > 0 {
			batches = append(batches, batch{set, els})
		}
	}
	if len(batches) == 0 {
		return nil
	}
	// Adding an element that exists keeps its old timeout: delete first
	// (each in its own transaction: a missing element fails one).
	for _, b := range batches {
		_ = c.SetDeleteElements(b.set, b.els)
		_ = c.Flush()
	}
	for _, b := range batches {
		if err := c.SetAddElements(b.set, b.els); err != nil {
			return err
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: admit %v for sandbox %s: %w", addrs, id, err)
	}
	return nil
}

// ---- expressions -------------------------------------------------------------

// logRefusal reports the packet to the deny log's nfnetlink_log group
// (nflog.go) with prefix (its reason), at most DenyLogRate a second with
// a burst of DenyLogBurst per rule (so per sandbox and reason), and its
// first nflogSnaplen bytes only. It has no verdict: the next rule
// rejects. The group is the table's (nflogGroup).
func (f *firewall) logRefusal(prefix string) []expr.Any {
	return []expr.Any{
		&expr.Limit{Type: expr.LimitTypePkts, Rate: DenyLogRate, Unit: expr.LimitTimeSecond, Burst: DenyLogBurst},
		&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_SNAPLEN,
			Group: f.group, Snaplen: nflogSnaplen, Data: []byte(prefix)},
	}
}

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }
func jump(chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

func reject() []expr.Any {
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}
}

func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func iifname(n string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(n)}}
}

func oifnameNot(n string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifname(n)}}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func ipv4() []expr.Any { return nfproto(unix.NFPROTO_IPV4) }
func ipv6() []expr.Any { return nfproto(unix.NFPROTO_IPV6) }

func l4proto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func dport(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, p)},
	}
}

func established() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED),
			Xor:  make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// addrMatch matches the source (src) or destination address of the
// packet against p, an IPv4 or IPv6 prefix; the rule must match the
// family first.
func addrMatch(src bool, p netip.Prefix) []expr.Any {
	off, n := uint32(16), uint32(4)
	switch {
	case p.Addr().Is6() && src:
		off, n = 8, 16
	case p.Addr().Is6():
		off, n = 24, 16
	case src:
		off = 12
	}
	e := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}}
	if p.Bits() < p.Addr().BitLen() {
		mask := make([]byte, n)
		for i := 0; i < p.Bits(); i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)})
	}
	return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()})
}

func saddrIs(a netip.Addr) []expr.Any   { return addrMatch(true, netip.PrefixFrom(a, a.BitLen())) }
func daddrIs(a netip.Addr) []expr.Any   { return addrMatch(false, netip.PrefixFrom(a, a.BitLen())) }
func saddrIn(p netip.Prefix) []expr.Any { return addrMatch(true, p) }
func daddrIn(p netip.Prefix) []expr.Any { return addrMatch(false, p) }

// daddrPayload loads the destination address of family fm into register 1.
func daddrPayload(fm ipFamily) expr.Any {
	if fm.keyType == nftables.TypeIP6Addr {
		return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16}
	}
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}
}

func lookupDaddr(fm ipFamily, set string) []expr.Any {
	return []expr.Any{daddrPayload(fm), &expr.Lookup{SourceRegister: 1, SetName: set}}
}

// intervalElements turns prefixes of one family (IPv6 if v6) into the
// elements of an interval set: merged ranges, each a start and an
// exclusive end (none after the family's last address).
func intervalElements(ps []netip.Prefix, v6 bool) []nftables.SetElement {
	type rng struct{ lo, hi netip.Addr } // hi inclusive
	var rs []rng
	for _, p := range ps {
		if p.Addr().Is6() != v6 {
			continue
		}
		p = p.Masked()
		rs = append(rs, rng{p.Addr(), lastOf(p)})
	}
	slices.SortFunc(rs, func(a, b rng) int { return a.lo.Compare(b.lo) })
	var merged []rng
	for _, r := range rs {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			if next := last.hi.Next(); !next.IsValid() || r.lo.Compare(next) <= 0 {
				if r.hi.Compare(last.hi) > 0 {
					last.hi = r.hi
				}
				continue
			}
		}
		merged = append(merged, r)
	}
	var els []nftables.SetElement
	for _, r := range merged {
		els = append(els, nftables.SetElement{Key: r.lo.AsSlice()})
		if end := r.hi.Next(); end.IsValid() {
			els = append(els, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
	}
	return els
}

// lastOf is p's highest address.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
