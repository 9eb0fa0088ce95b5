package dhcpd

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// client is who sent a request: option 61 if present, else chaddr.
type client struct {
	key string
	mac mac
	cid string // hex(option 61)
}

func identify(req *dhcpv4.DHCPv4, m mac) client {
	if id := req.Options.Get(dhcpv4.OptionClientIdentifier); len(id) > 0 {
		h := hex.EncodeToString(id)
		return client{key: "id:" + h, mac: m, cid: h}
	}
	return client{key: "hw:" + m.String(), mac: m}
}

// ip4 converts a message's address field; nil, non-IPv4 and 0.0.0.0 are
// the invalid Addr (the field is not set).
func ip4(ip net.IP) netip.Addr {
	v4 := ip.To4()
	if v4 == nil {
		return netip.Addr{}
	}
	a := netip.AddrFrom4([4]byte(v4))
	if a.IsUnspecified() {
		return netip.Addr{}
	}
	return a
}

// Handle answers one request and returns the reply to send (to ReplyAddr),
// or nil when the server stays silent. It needs no socket: Serve feeds it,
// tests and fuzz targets call it directly.
func (s *Server) Handle(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	s.mu.Lock()
	resp, changed := s.handle(req)
	changed = changed || s.reclaimedSince()
	if changed {
		s.names.gen++
	}
	s.mu.Unlock()
	if changed {
		s.changed()
	}
	return resp
}

// handle is Handle with s.mu held; changed reports a lease change.
func (s *Server) handle(req *dhcpv4.DHCPv4) (resp *dhcpv4.DHCPv4, changed bool) {
	if req == nil || req.OpCode != dhcpv4.OpcodeBootRequest || req.HWType != iana.HWTypeEthernet {
		return s.drop(req, "not an Ethernet BOOTREQUEST")
	}
	m, ok := macOf(req.ClientHWAddr)
	if !ok || m[0]&1 != 0 || m == (mac{}) {
		return s.drop(req, "no unicast Ethernet chaddr")
	}
	if g := ip4(req.GatewayIPAddr); g.IsValid() && !s.pol.subnet.Contains(g) {
		return s.drop(req, "relayed from a subnet we do not serve")
	}
	cl := identify(req, m)
	now := s.now()
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		s.stats.discovers.Add(1)
		return s.discover(req, cl, now)
	case dhcpv4.MessageTypeRequest:
		s.stats.requests.Add(1)
		return s.request(req, cl, now)
	case dhcpv4.MessageTypeDecline:
		s.stats.declines.Add(1)
		return s.decline(req, cl, now)
	case dhcpv4.MessageTypeRelease:
		s.stats.releases.Add(1)
		return s.release(req, cl, now)
	case dhcpv4.MessageTypeInform:
		s.stats.informs.Add(1)
		return s.inform(req)
	}
	return s.drop(req, "not a client message")
}

func (s *Server) drop(req *dhcpv4.DHCPv4, why string) (*dhcpv4.DHCPv4, bool) {
	s.stats.dropped.Add(1)
	if req != nil && s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("dhcpd: dropped", "why", why, "type", req.MessageType(), "chaddr", req.ClientHWAddr)
	}
	return nil, false
}

// discover answers DHCPDISCOVER with an offer: the client's static
// address, else its previous address if it may keep it, else the address
// it asks for if free, else a free one. Offers are not rate-limited: they
// are held for OfferHold and reclaimed, oldest first, when the table or
// the pool is full.
func (s *Server) discover(req *dhcpv4.DHCPv4, cl client, now time.Time) (*dhcpv4.DHCPv4, bool) {
	e := s.byKey[cl.key]
	addr, ok := s.choose(cl, e, ip4(req.RequestedIPAddress()), now)
	if !ok {
		s.exhausted(now)
		return s.drop(req, "no address left")
	}
	if e == nil {
		e = &entry{key: cl.key, mac: cl.mac, cid: cl.cid}
	}
	e.mac, e.lastSeen = cl.mac, now
	s.setHostname(e, req)
	if e.state == StateBound && e.live(now) && e.ip == addr {
		s.set(e, addr, e.state, e.expiry) // a bound client starting over keeps its lease
	} else {
		unqueue(e) // before its group changes
		e.group, e.proven = s.groupOf(cl.mac), e.proven && e.ip == addr
		s.set(e, addr, StateOffered, now.Add(OfferHold))
	}
	s.stats.offers.Add(1)
	s.log.Debug("dhcpd: offer", "mac", cl.mac, "ip", addr)
	return s.reply(req, dhcpv4.MessageTypeOffer, addr), false
}

// choose picks the address to offer cl (whose entry is e, maybe nil) and
// makes room in the table for it.
func (s *Server) choose(cl client, e *entry, requested netip.Addr, now time.Time) (netip.Addr, bool) {
	if a, ok := s.staticFor(cl, now); ok {
		return a, true
	}
	for _, a := range []netip.Addr{e.addr(), requested} {
		if a.IsValid() && s.usable(a, cl, now) {
			_, ok := s.admit(cl, e, a, now)
			return a, ok
		}
	}
	freed, ok := s.admit(cl, e, netip.Addr{}, now)
	if !ok {
		return netip.Addr{}, false
	}
	if freed.IsValid() && s.reusable(freed, now) {
		return freed, true
	}
	if a, ok := s.nextFree(now); ok {
		return a, true
	}
	return s.evict(now, true)
}

func (e *entry) addr() netip.Addr {
	if e == nil {
		return netip.Addr{}
	}
	return e.ip
}

// request answers DHCPREQUEST in every client state: SELECTING (server
// identifier and requested address), INIT-REBOOT (requested address only)
// and RENEWING/REBINDING (ciaddr). The server is authoritative for its
// subnet: it NAKs an address that is wrong for the subnet, taken, or not
// the one it holds for the client, and (like dnsmasq's
// --dhcp-authoritative) ACKs a free, valid address for a client it has no
// record of, so a lost lease file does not renumber the LAN.
func (s *Server) request(req *dhcpv4.DHCPv4, cl client, now time.Time) (*dhcpv4.DHCPv4, bool) {
	e := s.byKey[cl.key]
	if sid := ip4(req.ServerIdentifier()); sid.IsValid() && sid != s.pol.cfg.ServerIP {
		// The client chose another server's offer: withdraw ours.
		if e != nil && e.state == StateOffered {
			s.del(e)
		}
		return nil, false
	}
	addr := ip4(req.RequestedIPAddress())
	if !addr.IsValid() {
		addr = ip4(req.ClientIPAddr)
	}
	if !addr.IsValid() {
		return s.drop(req, "request names no address")
	}
	switch {
	case !s.pol.subnet.Contains(addr):
		return s.nak(req, cl, "address is not on this network"), false
	case e != nil && e.live(now) && e.ip != addr:
		return s.nak(req, cl, "not the address held for this client"), false
	case !s.usable(addr, cl, now):
		changed := false
		if e != nil && e.ip == addr {
			// Its address left the pool, became someone's static address
			// or was declined: it must start over.
			s.del(e)
			changed = true
		}
		return s.nak(req, cl, "address not available"), changed
	}
	// A new device: no entry, or an offer to a device never seen using
	// its address. Its port's limit applies.
	newLease := e == nil || e.state == StateOffered && !e.proven
	group := s.groupOf(cl.mac)
	if newLease && !s.isStatic(cl.mac) && !s.limit(group, now) {
		return s.drop(req, "new leases rate-limited")
	}
	if _, ok := s.admit(cl, e, addr, now); !ok {
		s.exhausted(now)
		return s.drop(req, "lease table full")
	}
	fresh := e == nil || e.stateAt(now) != StateBound || e.ip != addr
	if e == nil {
		e = &entry{key: cl.key, mac: cl.mac, cid: cl.cid}
	}
	old := e.ip
	unqueue(e) // before its group changes
	e.mac, e.lastSeen, e.group = cl.mac, now, group
	s.setHostname(e, req)
	s.set(e, addr, StateBound, now.Add(s.pol.cfg.LeaseTime))
	s.bind(e, old, !fresh, now)
	s.share(now)
	if s.holdsStatic(e) {
		// Entries the device left under another client identity.
		for _, o := range s.byKey {
			if o.mac == e.mac && o != e {
				s.del(o)
			}
		}
	}
	s.stats.acks.Add(1)
	if fresh {
		// A flood's thousand leases would push the rest out of the log:
		// its warning (flooding) stands for them.
		lvl := slog.LevelInfo
		if g := s.groups[group]; g != nil && now.Sub(g.flood) < time.Minute {
			lvl = slog.LevelDebug
		}
		s.log.Log(context.Background(), lvl, "dhcpd: lease bound", "mac", cl.mac, "ip", addr, "hostname", e.hostname, "until", e.expiry)
	} else {
		s.log.Debug("dhcpd: lease renewed", "mac", cl.mac, "ip", addr, "until", e.expiry)
	}
	return s.reply(req, dhcpv4.MessageTypeAck, addr), true
}

// decline quarantines an address the client found in use (DHCPDECLINE).
func (s *Server) decline(req *dhcpv4.DHCPv4, cl client, now time.Time) (*dhcpv4.DHCPv4, bool) {
	if sid := ip4(req.ServerIdentifier()); sid.IsValid() && sid != s.pol.cfg.ServerIP {
		return nil, false
	}
	addr := ip4(req.RequestedIPAddress())
	e := s.byKey[cl.key]
	if e == nil || !addr.IsValid() || e.ip != addr || e.state != StateBound {
		// A client declines an address it was ACKed (RFC 2131 §3.1.5):
		// requiring a lease keeps a flood of DISCOVER+DECLINE from
		// quarantining the pool at line rate.
		return s.drop(req, "decline of an address not leased to this client")
	}
	s.del(e)
	s.quarantine(addr, now.Add(QuarantineTime))
	s.log.Warn("dhcpd: address declined, quarantined", "ip", addr, "mac", cl.mac, "for", QuarantineTime)
	return nil, true
}

// release frees the client's address (DHCPRELEASE). The entry stays as
// the client's memory of its address until the table needs the room.
func (s *Server) release(req *dhcpv4.DHCPv4, cl client, now time.Time) (*dhcpv4.DHCPv4, bool) {
	if sid := ip4(req.ServerIdentifier()); sid.IsValid() && sid != s.pol.cfg.ServerIP {
		return nil, false
	}
	e := s.byKey[cl.key]
	if e == nil || e.ip != ip4(req.ClientIPAddr) || e.state == StateReleased || e.state == StateOffered {
		return s.drop(req, "release of an address not leased to this client")
	}
	e.lastSeen = now
	s.set(e, e.ip, StateReleased, now)
	s.log.Info("dhcpd: lease released", "mac", cl.mac, "ip", e.ip)
	return nil, true
}

// inform answers DHCPINFORM: configuration without a lease.
func (s *Server) inform(req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, bool) {
	c := ip4(req.ClientIPAddr)
	if !c.IsValid() || !s.pol.subnet.Contains(c) {
		return s.drop(req, "inform from outside the subnet")
	}
	s.stats.acks.Add(1)
	return s.reply(req, dhcpv4.MessageTypeAck, netip.Addr{}), false
}

func (s *Server) nak(req *dhcpv4.DHCPv4, cl client, why string) *dhcpv4.DHCPv4 {
	s.stats.naks.Add(1)
	s.log.Debug("dhcpd: nak", "mac", cl.mac, "why", why)
	r := s.reply(req, dhcpv4.MessageTypeNak, netip.Addr{})
	r.UpdateOption(dhcpv4.OptMessage(why))
	return r
}

func (s *Server) exhausted(now time.Time) {
	if now.Sub(s.warned) >= time.Minute {
		s.warned = now
		s.log.Warn("dhcpd: no address left for a new client (pool exhausted or table full of bound leases)",
			"max_leases", s.pol.maxLeases, "dynamic", s.dynamic())
	}
}

func (s *Server) isStatic(m mac) bool {
	_, ok := s.static[m]
	return ok
}

// quarantine keeps a from being offered until until. The quarantine holds
// at most MaxLeases addresses: when it is full, the one that ends first
// leaves it early.
func (s *Server) quarantine(a netip.Addr, until time.Time) {
	if _, ok := s.declined[a]; !ok && len(s.declined) >= s.pol.maxLeases {
		var first netip.Addr
		for d, u := range s.declined {
			if !first.IsValid() || u.Before(s.declined[first]) {
				first = d
			}
		}
		delete(s.declined, first)
	}
	s.declined[a] = until
}

func (s *Server) quarantined(a netip.Addr, now time.Time) bool {
	until, ok := s.declined[a]
	return ok && now.Before(until)
}

// staticFor returns cl's static address if it can have it now: not
// quarantined and not held by another device's live lease (one made
// before the address became static; it is NAKed when it renews).
func (s *Server) staticFor(cl client, now time.Time) (netip.Addr, bool) {
	st, ok := s.static[cl.mac]
	if !ok || !s.pol.host(st.IP) || s.quarantined(st.IP, now) {
		return netip.Addr{}, false
	}
	if h := s.byIP[st.IP]; h != nil && h.mac != cl.mac && h.live(now) {
		return netip.Addr{}, false
	}
	return st.IP, true
}

// usable reports whether cl may have address a now.
func (s *Server) usable(a netip.Addr, cl client, now time.Time) bool {
	if !s.pol.host(a) || s.quarantined(a, now) {
		return false
	}
	if m, ok := s.staticIP[a]; ok {
		return m == cl.mac && s.free(a, cl, now)
	}
	if _, ok := s.staticFor(cl, now); ok {
		return false // a device with a static lease uses it
	}
	return s.pol.inPool(a) && s.free(a, cl, now)
}

// free reports whether nobody else holds a: no entry, cl's own entry, an
// entry that is not live, or the same device's static address under
// another client identity.
func (s *Server) free(a netip.Addr, cl client, now time.Time) bool {
	h := s.byIP[a]
	return h == nil || h.key == cl.key || !h.live(now) || (h.mac == cl.mac && s.staticIP[a] == cl.mac)
}

// setHostname takes the static lease's name, else option 12 sanitized.
func (s *Server) setHostname(e *entry, req *dhcpv4.DHCPv4) {
	if st, ok := s.static[e.mac]; ok && st.Hostname != "" {
		e.hostname = st.Hostname
		return
	}
	if h := sanitizeHostname(req.HostName()); h != "" {
		e.hostname = h
	}
}

// reply builds the answer of type mt to req; yiaddr is the address leased
// (invalid for NAK and for the ACK of an INFORM).
func (s *Server) reply(req *dhcpv4.DHCPv4, mt dhcpv4.MessageType, yiaddr netip.Addr) *dhcpv4.DHCPv4 {
	p := s.pol
	r := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		ClientHWAddr:  slices.Clone(req.ClientHWAddr),
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: net.IPv4zero,
		Options:       dhcpv4.Options{},
	}
	if g := ip4(req.GatewayIPAddr); g.IsValid() {
		r.GatewayIPAddr = g.AsSlice()
	}
	r.UpdateOption(dhcpv4.OptMessageType(mt))
	r.UpdateOption(dhcpv4.OptServerIdentifier(p.cfg.ServerIP.AsSlice()))
	// RFC 6842 (client identifier) and RFC 3046 (relay agent information).
	for _, c := range []dhcpv4.OptionCode{dhcpv4.OptionClientIdentifier, dhcpv4.OptionRelayAgentInformation} {
		if v := req.Options.Get(c); v != nil {
			r.UpdateOption(dhcpv4.OptGeneric(c, slices.Clone(v)))
		}
	}
	if mt == dhcpv4.MessageTypeNak {
		return r
	}
	if c := ip4(req.ClientIPAddr); c.IsValid() && mt == dhcpv4.MessageTypeAck {
		r.ClientIPAddr = c.AsSlice()
	}
	if yiaddr.IsValid() {
		r.YourIPAddr = yiaddr.AsSlice()
		for _, o := range p.leaseOpts {
			r.Options[o.Code.Code()] = o.Value.ToBytes()
		}
	}
	for _, o := range p.netOpts {
		r.Options[o.Code.Code()] = o.Value.ToBytes()
	}
	return r
}

func ips(as []netip.Addr) []net.IP {
	out := make([]net.IP, len(as))
	for i, a := range as {
		out[i] = a.AsSlice()
	}
	return out
}

// broadcast4 is the limited broadcast address, client port.
var broadcast4 = netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), dhcpv4.ClientPort)

// ReplyAddr is where resp, Handle's answer to req, goes (RFC 2131 §4.1):
// to the relay (giaddr, server port; a NAK then carries the broadcast bit),
// a NAK broadcast, an answer to a configured client (ciaddr) unicast, and
// every other answer broadcast. The RFC prefers unicast to yiaddr/chaddr
// when the broadcast bit is clear, but a UDP socket cannot send to an
// address the kernel has no ARP entry for, and the client answers no ARP
// before it is configured, so we broadcast, which the RFC allows ("MAY").
func ReplyAddr(req, resp *dhcpv4.DHCPv4) netip.AddrPort {
	nak := resp.MessageType() == dhcpv4.MessageTypeNak
	if g := ip4(req.GatewayIPAddr); g.IsValid() {
		if nak {
			resp.SetBroadcast()
		}
		return netip.AddrPortFrom(g, dhcpv4.ServerPort)
	}
	if c := ip4(req.ClientIPAddr); c.IsValid() && !nak {
		return netip.AddrPortFrom(c, dhcpv4.ClientPort)
	}
	return broadcast4
}
