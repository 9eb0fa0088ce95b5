package dhcpd

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Defaults and limits of a Config.
const (
	DefaultLeaseTime = 12 * time.Hour
	DefaultDomain    = "lan"
	DefaultMaxLeases = 4096 // the default table bound (capped by the pool size)
	MaxMaxLeases     = 65536
	DefaultNewLeases = 50 // leases for new clients bound per second and port (burst: twice that)
	// DefaultProbation is how long a new binding has to show use.
	DefaultProbation = time.Minute
	// DefaultUnprovenShare is the percentage of the pool that bindings
	// within their probation may hold.
	DefaultUnprovenShare = 25

	minProbation = 10 * time.Second
	maxProbation = time.Hour

	minLeaseTime = time.Minute
	maxLeaseTime = 365 * 24 * time.Hour
)

// Config configures a Server. Optional fields left at their zero value take
// the default their comment names.
type Config struct {
	// Interface is the LAN interface the socket is bound to (SO_BINDTODEVICE).
	Interface string
	// ServerIP is the router's LAN address: server identifier, default
	// router and (by default) DNS server. It must lie in Subnet.
	ServerIP netip.Addr
	// Subnet is the LAN's IPv4 prefix (host bits are ignored).
	Subnet netip.Prefix
	// PoolStart and PoolEnd bound the dynamic pool (both or neither;
	// default: the whole subnet). The network and broadcast addresses,
	// ServerIP, Exclude and static addresses are never handed out from it.
	PoolStart, PoolEnd netip.Addr
	// LeaseTime is the lease duration (default 12h, at least 1m).
	LeaseTime time.Duration
	// DNS servers sent in option 6 (default: ServerIP).
	DNS []netip.Addr
	// Domain sent in option 15 and stripped by Lookup (default "lan").
	Domain string
	// NTP servers sent in option 42 (none by default).
	NTP []netip.Addr
	// MTU sent in option 26 (0: not sent; else 68..65535).
	MTU int
	// Static leases: a MAC always gets its IP, which nobody else gets.
	Static []Static
	// Exclude lists addresses of Subnet never handed out (e.g. the host
	// port's own address).
	Exclude []netip.Addr
	// LeaseFile is where leases persist, an absolute path (e.g. under
	// /perm); empty keeps them in memory only.
	LeaseFile string
	// MaxLeases bounds the dynamic lease table (default: the pool size,
	// at most DefaultMaxLeases; at most MaxMaxLeases).
	MaxLeases int
	// NewLeasesPerSecond limits how many leases the server binds per
	// second for new devices (no lease, or never seen using one) on each
	// port (see PortOf; default DefaultNewLeases, burst twice that;
	// negative: unlimited). It slows a pool starvation attack that
	// completes DHCPREQUESTs, and keeps one on a port from using up the
	// new leases of another; offers are not limited (they are reclaimed
	// instead) and known devices and statics never are.
	NewLeasesPerSecond int
	// Probation is how long a new binding has to show that its device
	// uses the address (Activity) before it counts as unused, 10s..1h
	// (default DefaultProbation). UnprovenShare is the percentage of the
	// pool, 1..100 (default DefaultUnprovenShare), that bindings still
	// within it hold at most. See probation.go.
	Probation     time.Duration
	UnprovenShare int
	// Activity, if set, reports when the device at ip with MAC hw last
	// had traffic through the box (zero: none seen): a binding is proven
	// by activity since it began. Without it every binding counts as
	// proven. It is called with the server's lock held and must not call
	// the server.
	Activity func(ip netip.Addr, hw net.HardwareAddr) time.Time
	// PortOf, if set, names the port where the device with MAC hw is
	// ("" unknown): new devices are limited per port. With zones it
	// names the zone. The same rules as for Activity hold.
	PortOf func(hw net.HardwareAddr) string
}

// Static is a static lease.
type Static struct {
	MAC      net.HardwareAddr
	IP       netip.Addr
	Hostname string // a DNS label, optional
}

// policy is a validated Config with its defaults filled in and the sets
// the handler asks about precomputed. It is immutable once built.
type policy struct {
	cfg        Config
	subnet     netip.Prefix // masked
	network    netip.Addr
	broadcast  netip.Addr
	mask       net.IPMask
	start, end uint32 // pool range, inclusive
	exclude    map[netip.Addr]bool
	static     map[mac]Static // by MAC
	maxLeases  int
	newRate    int             // new leases per second and port; < 0: unlimited
	probation  time.Duration   // see Config.Probation
	unproven   int             // bindings within their probation, at most
	leaseOpts  []dhcpv4.Option // options of a reply that leases an address
	netOpts    []dhcpv4.Option // options of every OFFER and ACK
}

// rawOption is an option value encoded once, for every reply.
type rawOption []byte

func (o rawOption) ToBytes() []byte { return o }
func (o rawOption) String() string  { return fmt.Sprintf("%x", []byte(o)) }

// encodeOptions precomputes the options of replies.
func (p *policy) encodeOptions() {
	raw := func(o dhcpv4.Option) dhcpv4.Option {
		b := o.Value.ToBytes()
		return dhcpv4.Option{Code: o.Code, Value: rawOption(b[:len(b):len(b)])} // an append copies
	}
	lt := p.cfg.LeaseTime
	p.leaseOpts = []dhcpv4.Option{
		raw(dhcpv4.OptIPAddressLeaseTime(lt)),
		raw(dhcpv4.OptRenewTimeValue(lt / 2)),
		raw(dhcpv4.OptRebindingTimeValue(lt * 7 / 8)),
	}
	p.netOpts = []dhcpv4.Option{
		raw(dhcpv4.OptSubnetMask(p.mask)),
		raw(dhcpv4.OptRouter(p.cfg.ServerIP.AsSlice())),
		raw(dhcpv4.OptBroadcastAddress(p.broadcast.AsSlice())),
		raw(dhcpv4.OptDNS(ips(p.cfg.DNS)...)),
		raw(dhcpv4.OptDomainName(p.cfg.Domain)),
	}
	if len(p.cfg.NTP) > 0 {
		p.netOpts = append(p.netOpts, raw(dhcpv4.OptNTPServers(ips(p.cfg.NTP)...)))
	}
	if p.cfg.MTU != 0 {
		p.netOpts = append(p.netOpts, raw(dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{byte(p.cfg.MTU >> 8), byte(p.cfg.MTU)})))
	}
}

// mac is an Ethernet address usable as a map key.
type mac [6]byte

func (m mac) String() string { return net.HardwareAddr(m[:]).String() }

func macOf(hw net.HardwareAddr) (mac, bool) {
	var m mac
	if len(hw) != len(m) {
		return m, false
	}
	copy(m[:], hw)
	return m, true
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addrOf(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// newPolicy validates cfg and fills in its defaults.
func newPolicy(cfg Config) (*policy, error) {
	p, err := buildPolicy(cfg)
	if err != nil {
		return nil, fmt.Errorf("dhcpd config: %w", err)
	}
	return p, nil
}

func buildPolicy(cfg Config) (*policy, error) {
	if cfg.Interface == "" {
		return nil, fieldError("Interface", "is empty")
	}
	if len(cfg.Interface) >= 16 || strings.ContainsAny(cfg.Interface, "/ \x00") {
		return nil, fieldError("Interface", "%q is not an interface name", cfg.Interface)
	}
	if !cfg.Subnet.IsValid() || !cfg.Subnet.Addr().Is4() {
		return nil, fieldError("Subnet", "%v is not an IPv4 prefix", cfg.Subnet)
	}
	if b := cfg.Subnet.Bits(); b < 8 || b > 30 {
		return nil, fieldError("Subnet", "%v: prefix length must be 8..30", cfg.Subnet)
	}
	cfg.DNS, cfg.NTP, cfg.Exclude = slices.Clone(cfg.DNS), slices.Clone(cfg.NTP), slices.Clone(cfg.Exclude)
	p := &policy{subnet: cfg.Subnet.Masked()}
	p.network = p.subnet.Addr()
	hostBits := uint32(1)<<(32-p.subnet.Bits()) - 1
	p.broadcast = addrOf(u32(p.network) | hostBits)
	p.mask = net.CIDRMask(p.subnet.Bits(), 32)
	for _, step := range []func(*Config) error{p.checkPool, checkClientOptions, p.checkStatics} {
		if err := step(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.LeaseFile != "" && !filepath.IsAbs(cfg.LeaseFile) {
		return nil, fmt.Errorf("LeaseFile %q: not an absolute path", cfg.LeaseFile)
	}
	p.cfg = cfg
	if err := p.checkLimits(); err != nil {
		return nil, err
	}
	p.encodeOptions()
	return p, nil
}

// inside reports why a is not a usable host address of the subnet.
func (p *policy) inside(a netip.Addr) error {
	switch {
	case !a.Is4():
		return errors.New("not an IPv4 address")
	case !p.subnet.Contains(a):
		return fmt.Errorf("outside Subnet %v", p.subnet)
	case a == p.network:
		return errors.New("is the network address")
	case a == p.broadcast:
		return errors.New("is the broadcast address")
	}
	return nil
}

// checkPool checks the server's address, the exclusions and the pool's
// bounds, and sets them.
func (p *policy) checkPool(cfg *Config) error {
	if err := p.inside(cfg.ServerIP); err != nil {
		return fmt.Errorf("ServerIP %v: %w", cfg.ServerIP, err)
	}
	p.exclude = map[netip.Addr]bool{}
	for i, a := range cfg.Exclude {
		if !a.Is4() || !p.subnet.Contains(a) {
			return fieldError(fmt.Sprintf("Exclude[%d]", i), "%v: not an address of Subnet %v", a, p.subnet)
		}
		p.exclude[a] = true
	}
	switch {
	case !cfg.PoolStart.IsValid() && !cfg.PoolEnd.IsValid():
		p.start, p.end = u32(p.network)+1, u32(p.broadcast)-1
	case !cfg.PoolStart.IsValid() || !cfg.PoolEnd.IsValid():
		return errors.New("PoolStart and PoolEnd: set both or neither")
	default:
		if err := p.inside(cfg.PoolStart); err != nil {
			return fmt.Errorf("PoolStart %v: %w", cfg.PoolStart, err)
		}
		if err := p.inside(cfg.PoolEnd); err != nil {
			return fmt.Errorf("PoolEnd %v: %w", cfg.PoolEnd, err)
		}
		p.start, p.end = u32(cfg.PoolStart), u32(cfg.PoolEnd)
		if p.start > p.end {
			return fmt.Errorf("PoolStart %v is after PoolEnd %v", cfg.PoolStart, cfg.PoolEnd)
		}
	}
	return nil
}

// checkClientOptions checks the lease time and the options given to clients,
// filling in their defaults.
func checkClientOptions(cfg *Config) error {
	switch {
	case cfg.LeaseTime == 0:
		cfg.LeaseTime = DefaultLeaseTime
	case cfg.LeaseTime < minLeaseTime || cfg.LeaseTime > maxLeaseTime:
		return fmt.Errorf("LeaseTime %v: must be %v..%v", cfg.LeaseTime, minLeaseTime, maxLeaseTime)
	}
	cfg.LeaseTime = cfg.LeaseTime.Truncate(time.Second)
	if len(cfg.DNS) == 0 {
		cfg.DNS = []netip.Addr{cfg.ServerIP}
	}
	for i, a := range cfg.DNS {
		if !a.Is4() || a.IsUnspecified() {
			return fmt.Errorf("DNS[%d] %v: not an IPv4 address", i, a)
		}
	}
	for i, a := range cfg.NTP {
		if !a.Is4() || a.IsUnspecified() {
			return fmt.Errorf("NTP[%d] %v: not an IPv4 address", i, a)
		}
	}
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	cfg.Domain = strings.ToLower(strings.TrimSuffix(cfg.Domain, "."))
	if err := checkDomain(cfg.Domain); err != nil {
		return fieldError("Domain", "%q: %w", cfg.Domain, err)
	}
	if cfg.MTU != 0 && (cfg.MTU < 68 || cfg.MTU > 65535) {
		return fmt.Errorf("MTU %d: must be 68..65535 (or 0: not sent)", cfg.MTU)
	}
	return nil
}

// checkStatics checks the static leases (one per MAC, address and name)
// and indexes them by MAC.
func (p *policy) checkStatics(cfg *Config) error {
	p.static = map[mac]Static{}
	byIP := map[netip.Addr]int{}
	byName := map[string]int{}
	statics := make([]Static, len(cfg.Static))
	for i, st := range cfg.Static {
		m, ok := macOf(st.MAC)
		if !ok {
			return fmt.Errorf("Static[%d].MAC %v: not an Ethernet address", i, st.MAC)
		}
		if _, dup := p.static[m]; dup {
			return fmt.Errorf("Static[%d].MAC %v: listed twice", i, st.MAC)
		}
		if err := p.inside(st.IP); err != nil {
			return fmt.Errorf("Static[%d].IP %v: %w", i, st.IP, err)
		}
		switch {
		case st.IP == cfg.ServerIP:
			return fmt.Errorf("Static[%d].IP %v: is ServerIP", i, st.IP)
		case p.exclude[st.IP]:
			return fmt.Errorf("Static[%d].IP %v: is excluded", i, st.IP)
		}
		if j, dup := byIP[st.IP]; dup {
			return fmt.Errorf("Static[%d].IP %v: already Static[%d]'s", i, st.IP, j)
		}
		byIP[st.IP] = i
		st.Hostname = strings.ToLower(st.Hostname)
		if st.Hostname != "" && !validLabel(st.Hostname) {
			return fmt.Errorf("Static[%d].Hostname %q: not a DNS label (letters, digits, '-', 1..63)", i, st.Hostname)
		}
		if j, dup := byName[st.Hostname]; dup && st.Hostname != "" {
			return fmt.Errorf("Static[%d].Hostname %q: already Static[%d]'s", i, st.Hostname, j)
		}
		byName[st.Hostname] = i
		st.MAC = slices.Clone(net.HardwareAddr(m[:]))
		p.static[m] = st
		statics[i] = st
	}
	cfg.Static = statics
	return nil
}

// checkLimits checks the lease count and rate limits against the pool
// left, filling in their defaults.
func (p *policy) checkLimits() error {
	pool := p.poolSize(nil)
	if pool == 0 {
		return errors.New("the pool has no address left after ServerIP, Exclude and Static")
	}
	switch {
	case p.cfg.MaxLeases == 0:
		p.maxLeases = min(pool, DefaultMaxLeases)
	case p.cfg.MaxLeases < 0 || p.cfg.MaxLeases > MaxMaxLeases:
		return fmt.Errorf("MaxLeases %d: must be 1..%d (or 0: default)", p.cfg.MaxLeases, MaxMaxLeases)
	default:
		p.maxLeases = p.cfg.MaxLeases
	}
	p.newRate = p.cfg.NewLeasesPerSecond
	if p.newRate == 0 {
		p.newRate = DefaultNewLeases
	}
	p.cfg.MaxLeases, p.cfg.NewLeasesPerSecond = p.maxLeases, p.newRate
	switch p.probation = p.cfg.Probation; {
	case p.probation == 0:
		p.probation = DefaultProbation
	case p.probation < minProbation || p.probation > maxProbation:
		return fieldError("Probation", "%v must be %v..%v (or 0: default)", p.probation, minProbation, maxProbation)
	}
	share := p.cfg.UnprovenShare
	switch {
	case share == 0:
		share = DefaultUnprovenShare
	case share < 0 || share > 100:
		return fmt.Errorf("UnprovenShare %d: must be 1..100 (or 0: default)", share)
	}
	p.unproven = max(1, min(pool, p.maxLeases)*share/100)
	p.cfg.Probation, p.cfg.UnprovenShare = p.probation, share
	return nil
}

func (p *policy) inPool(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	v := u32(a)
	return v >= p.start && v <= p.end
}

// host reports whether a is an address of the subnet that may be leased at
// all: not the network, broadcast, server or an excluded address.
func (p *policy) host(a netip.Addr) bool {
	return a.Is4() && p.subnet.Contains(a) && a != p.network && a != p.broadcast &&
		a != p.cfg.ServerIP && !p.exclude[a]
}

// poolSize counts the pool's dynamic addresses: the range without the
// addresses host refuses and without the static ones (config and pins).
func (p *policy) poolSize(pinned map[netip.Addr]bool) int {
	n := int(p.end - p.start + 1)
	special := map[netip.Addr]bool{p.network: true, p.broadcast: true, p.cfg.ServerIP: true}
	for a := range p.exclude {
		special[a] = true
	}
	for _, st := range p.static {
		special[st.IP] = true
	}
	for a := range pinned {
		special[a] = true
	}
	for a := range special {
		if p.inPool(a) {
			n--
		}
	}
	return n
}

// fieldError is a config error about the named field.
func fieldError(field, format string, args ...any) error {
	return fmt.Errorf(field+": "+format, args...)
}

// validLabel reports whether s is a lower-case DNS label.
func validLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func checkDomain(d string) error {
	if len(d) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, l := range strings.Split(d, ".") {
		if !validLabel(l) {
			return fmt.Errorf("label %q: not a DNS label", l)
		}
	}
	return nil
}

// clone returns a deep copy of c, sharing no slice with it.
func (c Config) clone() Config {
	c.DNS, c.NTP, c.Exclude = slices.Clone(c.DNS), slices.Clone(c.NTP), slices.Clone(c.Exclude)
	c.Static = slices.Clone(c.Static)
	for i := range c.Static {
		c.Static[i].MAC = slices.Clone(c.Static[i].MAC)
	}
	return c
}
