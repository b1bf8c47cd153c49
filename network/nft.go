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
//	               chain from_sandbox: ip saddr A → jump sb_ID (one rule per
//	                    sandbox, tagged with its id); IPv6 → drop; reject
//	               chain sb_ID: the sandbox's CIDRs → accept; @blocked → reject;
//	                    @dyn_ID (answers of its resolver) → accept; "*" → accept; reject
//	               chain postrouting (nat): from the subnet, not to the bridge → masquerade
//	               set blocked: the always-blocked destinations
//	bridge <table> chain forward: iifname VETH → drop (one rule per sandbox: frames
//	                    from its port to another port of the bridge)
//
// A sandbox's namespace belongs to the host's user namespace, so sandbox
// root has neither CAP_NET_ADMIN nor CAP_NET_RAW there: it cannot change
// its address or forge one, and matching on the source address is sound.

const (
	chainForward  = "forward"
	chainInput    = "input"
	chainToHost   = "to_host"
	chainFromSb   = "from_sandbox"
	chainPost     = "postrouting"
	setBlocked    = "blocked"
	sbChainPrefix = "sb_"
	dynSetPrefix  = "dyn_"
	dynPSetPrefix = "dynp_"
	tagPrefix     = "boxd:"
)

type firewall struct {
	table  string
	group  uint16 // nfnetlink_log group of the deny log
	bridge string
	subnet netip.Prefix
	gw     netip.Addr
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
	add(f.logRefusal("H"))
	add(reject())
}

// blockedSetOf is the always-blocked set of table t.
func blockedSetOf(t *nftables.Table) *nftables.Set {
	return &nftables.Set{Table: t, Name: setBlocked, KeyType: nftables.TypeIPAddr, Interval: true}
}

// fillBlocked queues the replacement of the always-blocked set's elements
// on c: committed with c's other changes, in one transaction.
func (f *firewall) fillBlocked(c *nftables.Conn, blocked []netip.Prefix) error {
	set := blockedSetOf(f.inet())
	c.FlushSet(set)
	if err := c.SetAddElements(set, intervalElements(blocked)); err != nil {
		return fmt.Errorf("nftables: blocked set: %w", err)
	}
	return nil
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
	if err := c.AddSet(blockedSetOf(t), nil); err != nil {
		return fmt.Errorf("nftables: blocked set: %w", err)
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

	// NAT to whatever interface the host routes the packet out of.
	add(post, ipv4(), saddrIn(f.subnet), oifnameNot(f.bridge), []expr.Any{&expr.Masq{}})

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

// install adds (or, if present, replaces) sandbox id's rules: its jump in
// from_sandbox, its chain and its sets; and refreshes the always-blocked
// set (the host's addresses can change), all in one transaction. fresh
// says id has no rules yet, which spares listing the chains to find them.
func (f *firewall) install(id string, addr netip.Addr, veth string, allow []Dest, blocked []netip.Prefix, fresh bool) error {
	c, err := conn()
	if err != nil {
		return err
	}
	t := f.inet()
	if err := f.fillBlocked(c, blocked); err != nil {
		return err
	}
	ch := c.AddChain(&nftables.Chain{Name: sbChainPrefix + id, Table: t})
	dyn := &nftables.Set{Table: t, Name: dynSetPrefix + id, KeyType: nftables.TypeIPAddr, HasTimeout: true}
	dynp := &nftables.Set{Table: t, Name: dynPSetPrefix + id, KeyType: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService),
		Concatenation: true, HasTimeout: true}
	if err := c.AddSet(dyn, nil); err != nil {
		return fmt.Errorf("nftables: set %s: %w", dyn.Name, err)
	}
	if err := c.AddSet(dynp, nil); err != nil {
		return fmt.Errorf("nftables: set %s: %w", dynp.Name, err)
	}
	c.FlushChain(ch)
	f.addAllowRules(c, ch, dyn, dynp, allow)
	// The jump goes in only once; a re-install (restart) finds it.
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
// which answer came from which name is not kept).
func (f *firewall) replaceAllow(id string, allow []Dest, forget bool) error {
	c, err := conn()
	if err != nil {
		return err
	}
	t := f.inet()
	ch := &nftables.Chain{Name: sbChainPrefix + id, Table: t}
	dyn := &nftables.Set{Table: t, Name: dynSetPrefix + id}
	dynp := &nftables.Set{Table: t, Name: dynPSetPrefix + id}
	c.FlushChain(ch)
	if forget {
		c.FlushSet(dyn)
		c.FlushSet(dynp)
	}
	f.addAllowRules(c, ch, dyn, dynp, allow)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: rules of sandbox %s: %w", id, err)
	}
	return nil
}

func (f *firewall) addAllowRules(c *nftables.Conn, ch *nftables.Chain, dyn, dynp *nftables.Set, allow []Dest) {
	t := ch.Table
	add := func(e ...[]expr.Any) { c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: slices.Concat(e...)}) }
	withPort := func(port uint16, match []expr.Any) {
		if port == 0 {
			add(ipv4(), match, verdict(expr.VerdictAccept))
			return
		}
		for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			add(ipv4(), match, l4proto(proto), dport(port), verdict(expr.VerdictAccept))
		}
	}
	// A CIDR the caller named is allowed even inside the blocked set.
	for _, d := range allow {
		if d.IsCIDR() {
			withPort(d.Port, daddrIn(d.Prefix))
		}
	}
	add(ipv4(), lookupDaddr(setBlocked, false), f.logRefusal("B"))
	add(ipv4(), lookupDaddr(setBlocked, false), reject())
	// Addresses the sandbox's resolver handed out for allowed names.
	add(ipv4(), lookupDaddr(dyn.Name, false), verdict(expr.VerdictAccept))
	for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		add(ipv4(), l4proto(proto), []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Lookup{SourceRegister: 1, SetName: dynp.Name},
		}, verdict(expr.VerdictAccept))
	}
	for _, d := range allow {
		if d.Any {
			withPort(d.Port, nil)
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
		if s.Name == dynSetPrefix+id || s.Name == dynPSetPrefix+id {
			c.DelSet(s)
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
		for _, p := range []string{dynSetPrefix, dynPSetPrefix} {
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

// admit adds resolver answers to sandbox id's sets for ttl.
func (f *firewall) admit(id string, addrs []netip.Addr, port uint16, ttl time.Duration) error {
	c, err := conn()
	if err != nil {
		return err
	}
	t := f.inet()
	var set *nftables.Set
	var els []nftables.SetElement
	for _, a := range addrs {
		if !a.Is4() {
			continue
		}
		k := a.AsSlice()
		if port != 0 {
			// Concatenated keys are padded to 32-bit registers.
			k = append(k, byte(port>>8), byte(port), 0, 0)
		}
		els = append(els, nftables.SetElement{Key: k, Timeout: ttl})
	}
	if len(els) == 0 {
		return nil
	}
	if port == 0 {
		set = &nftables.Set{Table: t, Name: dynSetPrefix + id, KeyType: nftables.TypeIPAddr, HasTimeout: true}
	} else {
		set = &nftables.Set{Table: t, Name: dynPSetPrefix + id, Concatenation: true, HasTimeout: true,
			KeyType: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService)}
	}
	// Adding an element that exists keeps its old timeout: delete first.
	_ = c.SetDeleteElements(set, els)
	_ = c.Flush()
	if err := c.SetAddElements(set, els); err != nil {
		return err
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

func addrMatch(offset uint32, p netip.Prefix) []expr.Any {
	e := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4}}
	if p.Bits() < 32 {
		mask := binary.BigEndian.AppendUint32(nil, ^uint32(0)<<(32-p.Bits()))
		if p.Bits() == 0 {
			mask = make([]byte, 4)
		}
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)})
	}
	return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()})
}

func saddrIs(a netip.Addr) []expr.Any   { return addrMatch(12, netip.PrefixFrom(a, 32)) }
func daddrIs(a netip.Addr) []expr.Any   { return addrMatch(16, netip.PrefixFrom(a, 32)) }
func saddrIn(p netip.Prefix) []expr.Any { return addrMatch(12, p) }
func daddrIn(p netip.Prefix) []expr.Any { return addrMatch(16, p) }
func lookupDaddr(set string, inv bool) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set, Invert: inv},
	}
}

// intervalElements turns prefixes into the elements of an interval set:
// merged ranges, each a start and an exclusive end.
func intervalElements(ps []netip.Prefix) []nftables.SetElement {
	type rng struct{ lo, hi uint64 } // hi exclusive
	var rs []rng
	for _, p := range ps {
		if !p.Addr().Is4() {
			continue
		}
		p = p.Masked()
		lo := uint64(binary.BigEndian.Uint32(p.Addr().AsSlice()))
		rs = append(rs, rng{lo, lo + 1<<(32-p.Bits())})
	}
	slices.SortFunc(rs, func(a, b rng) int { return int(a.lo) - int(b.lo) })
	var merged []rng
	for _, r := range rs {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	var els []nftables.SetElement
	for _, r := range merged {
		els = append(els, nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, uint32(r.lo))})
		if r.hi <= 1<<32-1 {
			els = append(els, nftables.SetElement{Key: binary.BigEndian.AppendUint32(nil, uint32(r.hi)), IntervalEnd: true})
		}
	}
	return els
}
