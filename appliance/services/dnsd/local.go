package dnsd

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// localReply is an answer the server gives from its own data.
type localReply struct {
	rcode  int
	answer []dns.RR
	ns     []dns.RR
}

// emptyZones are special-use names answered locally as empty zones, never
// forwarded: RFC 6761 §6.4 (invalid.), RFC 7686 (onion.), RFC 8375
// (home.arpa., unless it is the local domain).
var emptyZones = []string{"invalid.", "onion.", "home.arpa."}

// local answers q (whose canonical name is name) when the name is the
// router's to answer: the local domain, the box's and the LAN hosts'
// names, special-use names and the locally served reverse zones. ok false
// means forward it.
func (st *settings) local(q dns.Question, name string, arrived netip.Addr) (r localReply, ok bool) {
	switch {
	case dns.IsSubDomain("localhost.", name):
		// RFC 6761 §6.3: loopback for localhost. and every name below it.
		return st.addrReply(q, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}, "localhost."), true
	case dns.IsSubDomain(st.domain, name):
		return st.domainReply(q, name, arrived), true
	}
	for _, z := range emptyZones {
		if z != st.domain && dns.IsSubDomain(z, name) {
			if name == z {
				return st.nodata(z), true
			}
			return st.nxdomain(z), true
		}
	}
	if dns.CountLabel(name) == 1 {
		// A bare name: a LAN host's or the box's. Unknown bare names are
		// not sent upstream for addresses (dnsmasq's domain-needed); other
		// types (a TLD's NS, DS, SOA) are.
		label := strings.TrimSuffix(name, ".")
		if addrs := st.lookupName(label, arrived); len(addrs) > 0 {
			return st.addrReply(q, addrs, ""), true
		}
		switch q.Qtype {
		case dns.TypeA, dns.TypeAAAA, dns.TypeANY:
			return localReply{rcode: dns.RcodeNameError}, true
		}
		return localReply{}, false
	}
	if rn, ok := parseReverse(name); ok {
		return st.reverseReply(q, rn)
	}
	return localReply{}, false
}

// domainReply answers a name at or below the local domain.
func (st *settings) domainReply(q dns.Question, name string, arrived netip.Addr) localReply {
	if name == st.domain {
		var r localReply
		switch q.Qtype {
		case dns.TypeSOA:
			r.answer = []dns.RR{st.soa(st.domain)}
		case dns.TypeNS:
			if st.hostname != "" {
				r.answer = []dns.RR{&dns.NS{Hdr: st.hdr(q.Name, dns.TypeNS), Ns: st.hostname + "." + st.domain}}
			}
		case dns.TypeANY:
			r.answer = []dns.RR{st.soa(st.domain)}
		}
		if len(r.answer) == 0 {
			return st.nodata(st.domain)
		}
		return r
	}
	if dns.CountLabel(name) != dns.CountLabel(st.domain)+1 {
		return st.nxdomain(st.domain)
	}
	label := name[:strings.IndexByte(name, '.')]
	addrs := st.lookupName(label, arrived)
	if len(addrs) == 0 {
		return st.nxdomain(st.domain)
	}
	return st.addrReply(q, addrs, st.domain)
}

// reverseReply answers a reverse name that is a local host's PTR or lies
// in a locally served reverse zone.
func (st *settings) reverseReply(q dns.Question, rn reverseName) (localReply, bool) {
	zone, apex, inZone := st.reverseZone(rn)
	hosts := st.hosts()
	if rn.full() {
		target := ""
		if label, ok := st.lookupAddr(rn.prefix.Addr(), hosts); ok {
			target = label + "." + st.domain
		} else if rn.prefix.Addr().IsLoopback() {
			target = "localhost."
		}
		if target != "" {
			switch q.Qtype {
			case dns.TypePTR, dns.TypeANY:
				return localReply{answer: []dns.RR{&dns.PTR{Hdr: st.hdr(q.Name, dns.TypePTR), Ptr: target}}}, true
			}
			return st.nodata(zone), true
		}
	}
	if !inZone {
		return localReply{}, false
	}
	if apex {
		if q.Qtype == dns.TypeSOA {
			return localReply{answer: []dns.RR{st.soa(zone)}}, true
		}
		return st.nodata(zone), true
	}
	if !rn.below && !rn.full() {
		// An empty non-terminal above a known address exists: NODATA, not
		// NXDOMAIN (RFC 8020).
		for _, a := range st.listen {
			if rn.prefix.Contains(a) && st.hostname != "" {
				return st.nodata(zone), true
			}
		}
		for _, h := range hosts {
			if _, ok := hostLabel(h.Name, st.domain); ok && rn.prefix.Contains(h.Addr.Unmap()) {
				return st.nodata(zone), true
			}
		}
	}
	return st.nxdomain(zone), true
}

// reverseZone finds the most specific locally served reverse zone that
// holds rn: its apex name and whether rn is the apex.
func (st *settings) reverseZone(rn reverseName) (zone string, apex, ok bool) {
	best := -1
	for _, zs := range [][]netip.Prefix{st.subnets, privateReverse} {
		for _, z := range zs {
			if in, a := rn.inZone(z); in && z.Bits() > best {
				best, zone, apex, ok = z.Bits(), rn.apexName(z), a, true
			}
		}
	}
	return zone, apex, ok
}

// lookupName returns the addresses of a local label: the box's own (the
// address the query arrived on first) or a LAN host's.
func (st *settings) lookupName(label string, arrived netip.Addr) []netip.Addr {
	if st.hostname != "" && strings.EqualFold(label, st.hostname) {
		addrs := slices.Clone(st.listen)
		if i := slices.Index(addrs, arrived); i > 0 {
			addrs[0], addrs[i] = addrs[i], addrs[0]
		}
		return addrs
	}
	var addrs []netip.Addr
	for _, h := range st.hosts() {
		if l, ok := hostLabel(h.Name, st.domain); ok && strings.EqualFold(l, label) && h.Addr.IsValid() {
			if a := h.Addr.Unmap(); !a.IsUnspecified() && !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	return addrs
}

// lookupAddr returns the label that owns a, the box's first.
func (st *settings) lookupAddr(a netip.Addr, hosts []Host) (string, bool) {
	if st.hostname != "" && slices.Contains(st.listen, a) {
		return st.hostname, true
	}
	for _, h := range hosts {
		if h.Addr.Unmap() == a {
			if l, ok := hostLabel(h.Name, st.domain); ok {
				return strings.ToLower(l), true
			}
		}
	}
	return "", false
}

func (st *settings) hosts() []Host {
	if st.cfg.Local == nil {
		return nil
	}
	return st.cfg.Local.Hosts()
}

// hostLabel returns the label of a host name: the name itself, or the name
// less the local domain (domain is a canonical fqdn).
func hostLabel(name, domain string) (string, bool) {
	n := strings.TrimSuffix(name, ".")
	d := domain[:len(domain)-1]
	if len(n) > len(d)+1 && n[len(n)-len(d)-1] == '.' && strings.EqualFold(n[len(n)-len(d):], d) {
		n = n[:len(n)-len(d)-1]
	}
	return n, validLabel(n)
}

// addrReply answers A, AAAA or ANY with the addresses of their family; any
// other type (or no address of the family) is NODATA in zone.
func (st *settings) addrReply(q dns.Question, addrs []netip.Addr, zone string) localReply {
	var r localReply
	for _, a := range addrs {
		switch {
		case a.Is4() && (q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY):
			r.answer = append(r.answer, &dns.A{Hdr: st.hdr(q.Name, dns.TypeA), A: a.AsSlice()})
		case a.Is6() && (q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY):
			r.answer = append(r.answer, &dns.AAAA{Hdr: st.hdr(q.Name, dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	if len(r.answer) == 0 {
		return st.nodata(zone)
	}
	return r
}

func (st *settings) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: st.localTTL}
}

// nodata is NOERROR with no answer, the zone's SOA telling how long to
// cache that (no SOA for zone "").
func (st *settings) nodata(zone string) localReply {
	if zone == "" {
		return localReply{}
	}
	return localReply{ns: []dns.RR{st.soa(zone)}}
}

func (st *settings) nxdomain(zone string) localReply {
	r := st.nodata(zone)
	r.rcode = dns.RcodeNameError
	return r
}

// soa is the synthesized SOA of a locally served zone; its minimum (the
// negative TTL, RFC 2308) is LocalTTL.
func (st *settings) soa(zone string) *dns.SOA {
	ns := "localhost."
	if st.hostname != "" {
		ns = st.hostname + "." + st.domain
	}
	return &dns.SOA{
		Hdr:     st.hdr(zone, dns.TypeSOA),
		Ns:      ns,
		Mbox:    "nobody.invalid.",
		Serial:  1,
		Refresh: 3600,
		Retry:   1200,
		Expire:  604800,
		Minttl:  st.localTTL,
	}
}
