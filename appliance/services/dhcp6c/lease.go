package dhcp6c

import (
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// Prefix is a delegated prefix and until when it may be used.
type Prefix struct {
	Prefix    netip.Prefix `json:"prefix"`
	Preferred time.Time    `json:"preferred"` // after it the prefix is deprecated
	Valid     time.Time    `json:"valid"`     // after it the prefix is gone
}

// Address is an address from IA_NA and its lifetimes.
type Address struct {
	Addr      netip.Addr `json:"addr"`
	Preferred time.Time  `json:"preferred"`
	Valid     time.Time  `json:"valid"`
}

// Lease is what the server bound to the client.
type Lease struct {
	Prefixes []Prefix
	Addrs    []Address
	DNS      []netip.Addr // option 23
	Domains  []string     // option 24
	ServerID []byte       // the server's DUID
	// Server and ServerMAC are where the last Reply came from.
	Server    netip.Addr
	ServerMAC net.HardwareAddr
	Obtained  time.Time // when the exchange of the last Reply began
	T1, T2    time.Time // renew and rebind
}

// Clone returns a deep copy; nil stays nil.
func (l *Lease) Clone() *Lease {
	if l == nil {
		return nil
	}
	c := *l
	c.Prefixes = slices.Clone(l.Prefixes)
	c.Addrs = slices.Clone(l.Addrs)
	c.DNS = slices.Clone(l.DNS)
	c.Domains = slices.Clone(l.Domains)
	c.ServerID = slices.Clone(l.ServerID)
	c.ServerMAC = slices.Clone(l.ServerMAC)
	return &c
}

// Expiry is when the last valid lifetime ends.
func (l *Lease) Expiry() time.Time {
	var e time.Time
	for _, p := range l.Prefixes {
		if p.Valid.After(e) {
			e = p.Valid
		}
	}
	for _, a := range l.Addrs {
		if a.Valid.After(e) {
			e = a.Valid
		}
	}
	return e
}

// sameBinding says whether a and b bind the same prefixes and addresses
// and carry the same DNS settings (lifetimes aside).
func sameBinding(a, b *Lease) bool {
	if a == nil || b == nil {
		return a == b
	}
	pa := func(p Prefix) netip.Prefix { return p.Prefix }
	aa := func(a Address) netip.Addr { return a.Addr }
	return slices.Equal(mapped(a.Prefixes, pa), mapped(b.Prefixes, pa)) &&
		slices.Equal(mapped(a.Addrs, aa), mapped(b.Addrs, aa)) &&
		slices.Equal(a.DNS, b.DNS) && slices.Equal(a.Domains, b.Domains)
}

func mapped[T, U any](s []T, f func(T) U) []U {
	out := make([]U, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// infinite is the lifetime 0xffffffff (RFC 8415 section 7.7).
const infinite = 0xffffffff * time.Second

// until is at + d, where an infinite d never ends.
func until(at time.Time, d time.Duration) time.Time {
	if d >= infinite {
		return at.AddDate(100, 0, 0)
	}
	return at.Add(d)
}

// noBinding says which of our IAs a Reply has NoBinding for.
type noBinding struct{ pd, na bool }

func isNoBinding(st *dhcpv6.OptStatusCode) bool {
	return st != nil && st.StatusCode == iana.StatusNoBinding
}

// offered collects the usable prefixes and addresses of msg's IAs with our
// IAID (valid lifetime above 0, preferred not above valid, RFC 8415 18.2.10.1)
// and the prefixes returned with valid lifetime 0 (gone).
func offered(msg *dhcpv6.Message, iaid [4]byte, at time.Time) (ps []Prefix, as []Address, gone []netip.Prefix, nb noBinding) {
	for _, pd := range msg.Options.IAPD() {
		if pd.IaId != iaid {
			continue
		}
		nb.pd = nb.pd || isNoBinding(pd.Options.Status())
		for _, p := range pd.Options.Prefixes() {
			pfx, ok := netipPrefix(p.Prefix)
			if !ok || pfx.Bits() > 64 || !pfx.Addr().IsGlobalUnicast() {
				continue
			}
			if st := p.Options.Status(); st != nil && st.StatusCode != iana.StatusSuccess {
				continue
			}
			if p.ValidLifetime == 0 {
				gone = append(gone, pfx)
				continue
			}
			if p.PreferredLifetime > p.ValidLifetime {
				continue
			}
			ps = append(ps, Prefix{Prefix: pfx, Preferred: until(at, p.PreferredLifetime), Valid: until(at, p.ValidLifetime)})
		}
	}
	for _, na := range msg.Options.IANA() {
		if na.IaId != iaid {
			continue
		}
		nb.na = nb.na || isNoBinding(na.Options.Status())
		for _, a := range na.Options.Addresses() {
			addr, ok := netip.AddrFromSlice(a.IPv6Addr)
			if !ok || !addr.Is6() || !addr.IsGlobalUnicast() || a.ValidLifetime == 0 || a.PreferredLifetime > a.ValidLifetime {
				continue
			}
			as = append(as, Address{Addr: addr, Preferred: until(at, a.PreferredLifetime), Valid: until(at, a.ValidLifetime)})
		}
	}
	return ps, as, gone, nb
}

func netipPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok || !a.Is6() || a.Is4In6() {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits != 128 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones).Masked(), true
}

// merge is the lease after a Reply to an exchange that began at at: the
// prefixes and addresses the Reply carries, and those of old it does not
// mention and that are still valid at now (RFC 8415 18.2.10.1: they are
// used until their lifetimes end); gone ones are dropped.
func merge(old *Lease, msg *dhcpv6.Message, iaid [4]byte, at, now time.Time) *Lease {
	ps, as, gone, _ := offered(msg, iaid, at)
	l := &Lease{Prefixes: ps, Addrs: as, Obtained: at}
	if old != nil {
		for _, p := range old.Prefixes {
			if !slices.Contains(gone, p.Prefix) && now.Before(p.Valid) &&
				!slices.ContainsFunc(ps, func(q Prefix) bool { return q.Prefix == p.Prefix }) {
				l.Prefixes = append(l.Prefixes, p)
			}
		}
		for _, a := range old.Addrs {
			if now.Before(a.Valid) && !slices.ContainsFunc(as, func(b Address) bool { return b.Addr == a.Addr }) {
				l.Addrs = append(l.Addrs, a)
			}
		}
	}
	for _, ip := range msg.Options.DNS() {
		if a, ok := netip.AddrFromSlice(ip); ok && a.Is6() && !a.IsUnspecified() && !a.IsMulticast() {
			l.DNS = append(l.DNS, a)
		}
	}
	if dl := msg.Options.DomainSearchList(); dl != nil {
		l.Domains = slices.Clone(dl.Labels)
	}
	if sid := msg.Options.ServerID(); sid != nil {
		l.ServerID = sid.ToBytes()
	}
	l.T1, l.T2 = timers(msg, iaid, l, at)
	return l
}

// timers are T1 and T2 of the IAs in msg (the smallest non-zero ones);
// when the server leaves them 0, 0.5 and 0.8 of the shortest preferred
// lifetime (RFC 8415 section 14.2).
func timers(msg *dhcpv6.Message, iaid [4]byte, l *Lease, at time.Time) (t1, t2 time.Time) {
	var d1, d2 time.Duration
	pick := func(cur *time.Duration, v time.Duration) {
		if v > 0 && (*cur == 0 || v < *cur) {
			*cur = v
		}
	}
	for _, pd := range msg.Options.IAPD() {
		if pd.IaId == iaid {
			pick(&d1, pd.T1)
			pick(&d2, pd.T2)
		}
	}
	for _, na := range msg.Options.IANA() {
		if na.IaId == iaid {
			pick(&d1, na.T1)
			pick(&d2, na.T2)
		}
	}
	var pref time.Duration
	for _, p := range l.Prefixes {
		pick(&pref, p.Preferred.Sub(at))
	}
	for _, a := range l.Addrs {
		pick(&pref, a.Preferred.Sub(at))
	}
	if d1 == 0 {
		d1 = pref / 2
	}
	if d2 == 0 || d2 < d1 {
		d2 = max(d1, pref*4/5)
	}
	if d1 == 0 { // every preferred lifetime 0: renew soon
		d1, d2 = 10*time.Second, 20*time.Second
	}
	return until(at, d1), until(at, d2)
}
