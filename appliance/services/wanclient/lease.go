package wanclient

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Lease is the WAN configuration a DHCP server granted.
type Lease struct {
	// Addr is the leased address with the subnet mask's length.
	Addr netip.Prefix
	// Gateway is the first router (option 3); invalid when none was given.
	Gateway netip.Addr
	// DNS are the name servers (option 6).
	DNS []netip.Addr
	// Domain is the domain name (option 15).
	Domain string
	// MTU is the interface MTU (option 26), 0 when not given.
	MTU int
	// NTP are the time servers (option 42).
	NTP []netip.Addr
	// Server is the server identifier (option 54) of the server that
	// granted the lease.
	Server netip.Addr
	// ServerMAC is the Ethernet source of the ACK: the L2 next hop of the
	// unicast renewals (the server's, or its relay's, MAC).
	ServerMAC net.HardwareAddr
	// Obtained is when the exchange's first REQUEST was sent: T1, T2 and
	// Expiry count from it (RFC 2131 4.4.1), so they err on the early side.
	Obtained time.Time
	// T1 is when RENEWING starts (option 58, or half the lease).
	T1 time.Time
	// T2 is when REBINDING starts (option 59, or 7/8 of the lease).
	T2 time.Time
	// Expiry is when the lease ends (option 51).
	Expiry time.Time
}

// Clone returns a deep copy of l (nil for nil).
func (l *Lease) Clone() *Lease {
	if l == nil {
		return nil
	}
	c := *l
	c.DNS = slices.Clone(l.DNS)
	c.NTP = slices.Clone(l.NTP)
	c.ServerMAC = slices.Clone(l.ServerMAC)
	return &c
}

// sameConfig reports whether a and b configure the WAN alike: address,
// gateway, DNS, NTP, MTU and domain (not the times or the server).
func sameConfig(a, b *Lease) bool {
	return a.Addr == b.Addr && a.Gateway == b.Gateway && slices.Equal(a.DNS, b.DNS) &&
		slices.Equal(a.NTP, b.NTP) && a.MTU == b.MTU && a.Domain == b.Domain
}

// leaseFromACK reads the lease that ack grants. srcMAC and srcIP are the
// frame's sources (srcIP stands in for a missing server identifier);
// obtained is when the REQUEST was sent.
func leaseFromACK(ack *dhcpv4.DHCPv4, srcMAC net.HardwareAddr, srcIP netip.Addr, obtained time.Time) (*Lease, error) {
	addr, ok := addrFromIP(ack.YourIPAddr)
	if !ok || !usable(addr) {
		return nil, fmt.Errorf("no usable address (yiaddr %v)", ack.YourIPAddr)
	}
	bits, err := maskBits(ack, addr)
	if err != nil {
		return nil, err
	}
	leaseTime, err := seconds(ack, optLeaseTime)
	if err != nil {
		return nil, fmt.Errorf("lease time: %w", err)
	}
	if leaseTime == 0 {
		return nil, errors.New("no lease time")
	}
	t1, t2 := timers(ack, leaseTime)
	l := &Lease{
		Addr:      netip.PrefixFrom(addr, bits),
		DNS:       addrList(ack.DNS()),
		Domain:    strings.TrimRight(ack.DomainName(), "\x00"),
		NTP:       addrList(ack.NTPServers()),
		ServerMAC: slices.Clone(srcMAC),
		Obtained:  obtained,
		T1:        obtained.Add(t1),
		T2:        obtained.Add(t2),
		Expiry:    obtained.Add(leaseTime),
	}
	if gws := addrList(ack.Router()); len(gws) > 0 {
		l.Gateway = gws[0]
	}
	if mtu := ack.Options.Get(dhcpv4.OptionInterfaceMTU); len(mtu) == 2 {
		if v := int(mtu[0])<<8 | int(mtu[1]); v >= 68 {
			l.MTU = v
		}
	}
	if s, ok := addrFromIP(ack.ServerIdentifier()); ok && usable(s) {
		l.Server = s
	} else if usable(srcIP) {
		l.Server = srcIP
	} else {
		return nil, errors.New("no server identifier")
	}
	return l, nil
}

// maskBits is the prefix length of the subnet mask (option 1), or the
// address's classful length when the server sent none (RFC 1122 3.3.1.1's
// default, as other clients use).
func maskBits(ack *dhcpv4.DHCPv4, addr netip.Addr) (int, error) {
	raw := ack.Options.Get(dhcpv4.OptionSubnetMask)
	if raw == nil {
		switch a := addr.As4(); {
		case a[0] < 128:
			return 8, nil
		case a[0] < 192:
			return 16, nil
		default:
			return 24, nil
		}
	}
	if len(raw) != 4 {
		return 0, fmt.Errorf("subnet mask of %d bytes", len(raw))
	}
	ones, bits := net.IPMask(raw).Size()
	if bits != 32 || ones == 0 {
		return 0, fmt.Errorf("subnet mask %v is not a usable netmask", net.IP(raw))
	}
	return ones, nil
}

// seconds reads a 4-byte time option; 0 when it is absent.
func seconds(ack *dhcpv4.DHCPv4, code uint8) (time.Duration, error) {
	raw := ack.Options.Get(dhcpv4.GenericOptionCode(code))
	if raw == nil {
		return 0, nil
	}
	if len(raw) != 4 {
		return 0, fmt.Errorf("option %d has %d bytes, not 4", code, len(raw))
	}
	return time.Duration(uint32(raw[0])<<24|uint32(raw[1])<<16|uint32(raw[2])<<8|uint32(raw[3])) * time.Second, nil
}

// timers returns T1 and T2 for a lease of length d: options 58 and 59
// when they are sane (0 < T1 < T2 < d), else RFC 2131's 1/2 and 7/8.
func timers(ack *dhcpv4.DHCPv4, d time.Duration) (t1, t2 time.Duration) {
	t1, err1 := seconds(ack, optRenewalT1)
	t2, err2 := seconds(ack, optRebindingT2)
	if err2 != nil || t2 <= 0 || t2 >= d {
		t2 = d / 8 * 7 // not d*7: an infinite lease (2^32-1 s) would overflow
	}
	if err1 != nil || t1 <= 0 || t1 >= t2 {
		t1 = min(d/2, t2/7*4)
	}
	return t1, t2
}

// addrFromIP converts an IPv4 net.IP.
func addrFromIP(ip net.IP) (netip.Addr, bool) {
	ip4 := ip.To4()
	if ip4 == nil {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(ip4)), true
}

// usable reports whether a is an IPv4 unicast address a host can have.
func usable(a netip.Addr) bool {
	return a.Is4() && !a.IsUnspecified() && !a.IsLoopback() && !a.IsMulticast() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// addrList converts a server list, dropping entries that are no unicast
// addresses.
func addrList(ips []net.IP) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		if a, ok := addrFromIP(ip); ok && usable(a) {
			out = append(out, a)
		}
	}
	return out
}
