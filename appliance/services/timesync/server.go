package timesync

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ntpPort is the port a server spec without one is asked on.
const ntpPort = 123

// server is one parsed entry of Config.Servers: a literal address or a
// host name, and a port.
type server struct {
	host string     // a host name; "" when addr is set
	addr netip.Addr // a literal address; invalid when host is set
	port uint16
}

// parseServer parses a server spec: "192.0.2.1", "2001:db8::1",
// "[2001:db8::1]", "fe80::1%eth0", "192.0.2.1:1123", "[2001:db8::1]:123",
// "ntp.example" or
// "ntp.example:123".
func parseServer(spec string) (server, error) {
	if spec == "" {
		return server{}, fmt.Errorf("empty server")
	}
	bare := spec
	if len(spec) > 2 && spec[0] == '[' && spec[len(spec)-1] == ']' {
		bare = spec[1 : len(spec)-1]
	}
	if a, err := netip.ParseAddr(bare); err == nil {
		return server{addr: a, port: ntpPort}, nil
	}
	host, port := spec, uint16(ntpPort)
	if h, p, err := net.SplitHostPort(spec); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return server{}, fmt.Errorf("server %q: bad port %q", spec, p)
		}
		host, port = h, uint16(n)
		if a, err := netip.ParseAddr(host); err == nil {
			return server{addr: a, port: port}, nil
		}
		if strings.ContainsAny(spec, "[]") {
			return server{}, fmt.Errorf("server %q: brackets hold an IPv6 address", spec)
		}
	}
	if err := checkHostName(host); err != nil {
		return server{}, fmt.Errorf("server %q: %w", spec, err)
	}
	return server{host: strings.ToLower(strings.TrimSuffix(host, ".")), port: port}, nil
}

// checkHostName accepts DNS host names: dot-separated labels of letters,
// digits, '-' and '_' (used by some internal zones), none empty or longer
// than 63, none starting or ending with '-', 253 bytes at most, and not all
// digits and dots (that would be a malformed address).
func checkHostName(h string) error {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return fmt.Errorf("host name length %d not in 1..253", len(h))
	}
	numeric := true
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q length not in 1..63", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for _, r := range label {
			switch {
			case r >= '0' && r <= '9':
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '_':
				numeric = false
			default:
				return fmt.Errorf("invalid character %q", r)
			}
		}
	}
	if numeric {
		return fmt.Errorf("%q is neither an address nor a host name", h)
	}
	return nil
}

// String renders the server in a form parseServer reads back.
func (s server) String() string {
	h := s.host
	if s.addr.IsValid() {
		if s.port == ntpPort {
			return s.addr.String()
		}
		h = s.addr.String()
	}
	if s.port == ntpPort {
		return h
	}
	return net.JoinHostPort(h, strconv.Itoa(int(s.port)))
}

// resolve returns the addresses to query for s: the literal address, or
// the host name's addresses from r, IPv4 first (a router's WAN often has
// IPv4 before it has IPv6), each once.
func (s server) resolve(ctx context.Context, r Resolver) ([]netip.AddrPort, error) {
	if s.addr.IsValid() {
		return []netip.AddrPort{netip.AddrPortFrom(s.addr, s.port)}, nil
	}
	addrs, err := r.LookupNetIP(ctx, "ip", s.host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", s.host, err)
	}
	var out []netip.AddrPort
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), s.port)
		if a.IsValid() && !slices.Contains(out, ap) {
			out = append(out, ap)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", s.host)
	}
	slices.SortStableFunc(out, func(a, b netip.AddrPort) int {
		return cmp.Compare(family(a), family(b))
	})
	return out, nil
}

func family(a netip.AddrPort) int {
	if a.Addr().Is4() {
		return 4
	}
	return 6
}
