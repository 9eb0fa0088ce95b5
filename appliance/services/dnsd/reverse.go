package dnsd

import (
	"net/netip"
	"strconv"
	"strings"
)

// privateReverse are the prefixes whose reverse zones a resolver serves
// itself, empty, so their queries never leave the site: RFC 6303 §4 (and
// RFC 7793 for the shared address space 100.64.0.0/10).
var privateReverse = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fd00::/8"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("2001:db8::/32"),
}

const (
	suffix4 = ".in-addr.arpa."
	suffix6 = ".ip6.arpa."
)

// reverseName is what a name under in-addr.arpa. or ip6.arpa. spells: the
// prefix of its address labels (one octet or nibble each, read from the
// right) and whether labels that are not address labels sit below them.
// "7.0.0.10.in-addr.arpa." is 10.0.0.7/32; "10.in-addr.arpa." is
// 10.0.0.0/8; "x.10.in-addr.arpa." is 10.0.0.0/8 with below set.
type reverseName struct {
	prefix netip.Prefix
	below  bool
}

// full reports whether the name is exactly one address's PTR name.
func (r reverseName) full() bool { return !r.below && r.prefix.IsSingleIP() }

// unit is the bits one label stands for.
func (r reverseName) unit() int {
	if r.prefix.Addr().Is4() {
		return 8
	}
	return 4
}

// parseReverse parses a canonical (lowercase, fully qualified) name. It
// reports false for names not under in-addr.arpa. or ip6.arpa.
func parseReverse(name string) (reverseName, bool) {
	var rest string
	var v4 bool
	switch {
	case name == suffix4[1:]:
		return reverseName{prefix: netip.PrefixFrom(netip.IPv4Unspecified(), 0)}, true
	case name == suffix6[1:]:
		return reverseName{prefix: netip.PrefixFrom(netip.IPv6Unspecified(), 0)}, true
	case strings.HasSuffix(name, suffix4):
		rest, v4 = name[:len(name)-len(suffix4)], true
	case strings.HasSuffix(name, suffix6):
		rest = name[:len(name)-len(suffix6)]
	default:
		return reverseName{}, false
	}
	if rest == "" {
		return reverseName{}, false // ".in-addr.arpa.": an empty label
	}
	var b [16]byte
	n, max := 0, 32
	if v4 {
		max = 4
	}
	more := true // labels are left to read (perhaps an empty one)
	for more && n < max {
		i := strings.LastIndexByte(rest, '.')
		v, ok := addrLabel(rest[i+1:], v4)
		if !ok {
			break
		}
		if v4 {
			b[n] = v
		} else {
			b[n/2] |= v << (4 * (1 - n%2))
		}
		n++
		if i < 0 {
			more = false
		} else {
			rest = rest[:i]
		}
	}
	r := reverseName{below: more}
	if v4 {
		r.prefix = netip.PrefixFrom(netip.AddrFrom4([4]byte(b[:4])), 8*n)
	} else {
		r.prefix = netip.PrefixFrom(netip.AddrFrom16(b), 4*n)
	}
	return r, true
}

// addrLabel parses one label of a reverse name: a decimal octet without
// leading zeros (IPv4) or one hex nibble (IPv6).
func addrLabel(l string, v4 bool) (byte, bool) {
	if !v4 {
		if len(l) != 1 {
			return 0, false
		}
		switch c := l[0]; {
		case c >= '0' && c <= '9':
			return c - '0', true
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10, true
		}
		return 0, false
	}
	if len(l) == 0 || len(l) > 3 || (len(l) > 1 && l[0] == '0') {
		return 0, false
	}
	v := 0
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return 0, false
		}
		v = v*10 + int(l[i]-'0')
	}
	if v > 255 {
		return 0, false
	}
	return byte(v), true
}

// inZone reports whether the name lies in the reverse zone of z: at or
// below the zone's apex (for z 172.16.0.0/12 the apexes are
// 16.172.in-addr.arpa. to 31.172.in-addr.arpa.). apex says it is one.
func (r reverseName) inZone(z netip.Prefix) (in, apex bool) {
	if z.Addr().Is4() != r.prefix.Addr().Is4() || r.prefix.Bits() < z.Bits() || !z.Contains(r.prefix.Addr()) {
		return false, false
	}
	u := r.unit()
	apexBits := (z.Bits() + u - 1) / u * u
	if r.prefix.Bits() < apexBits {
		// Above the apex, as 172.in-addr.arpa. is for 172.16.0.0/12.
		return false, false
	}
	return true, !r.below && r.prefix.Bits() == apexBits
}

// apexName is the apex of z's reverse zone that holds this name.
func (r reverseName) apexName(z netip.Prefix) string {
	u := r.unit()
	apexBits := (z.Bits() + u - 1) / u * u
	return reverseString(netip.PrefixFrom(r.prefix.Addr(), apexBits).Masked())
}

// reverseString is the reverse name of a prefix whose length is a whole
// number of labels (octets or nibbles).
func reverseString(p netip.Prefix) string {
	var sb strings.Builder
	a := p.Addr().AsSlice()
	if p.Addr().Is4() {
		for i := p.Bits()/8 - 1; i >= 0; i-- {
			sb.WriteString(strconv.Itoa(int(a[i])))
			sb.WriteByte('.')
		}
		sb.WriteString(suffix4[1:])
		return sb.String()
	}
	const hex = "0123456789abcdef"
	for n := p.Bits()/4 - 1; n >= 0; n-- {
		v := a[n/2] >> (4 * (1 - n%2)) & 0xf
		sb.WriteByte(hex[v])
		sb.WriteByte('.')
	}
	sb.WriteString(suffix6[1:])
	return sb.String()
}
