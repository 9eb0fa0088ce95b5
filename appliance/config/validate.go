package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"e1kbox/rules"
)

// Env is what validation needs to know about the box.
type Env struct {
	// Interfaces are the names of the network interfaces that exist. nil
	// skips the check (validating off the box); SystemEnv fills it.
	Interfaces []string
}

// SystemEnv returns the Env of the running system.
func SystemEnv() (Env, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return Env{}, fmt.Errorf("list network interfaces: %w", err)
	}
	env := Env{Interfaces: make([]string, 0, len(ifs))}
	for _, i := range ifs {
		env.Interfaces = append(env.Interfaces, i.Name)
	}
	return env, nil
}

// Limits checked by Validate.
const (
	MinMTU = 68
	MaxMTU = 9216
	// MinNATMTU is the smallest MTU of a router port in NAT mode: RFC
	// 791's 576-byte datagram every host must accept.
	MinNATMTU = 576
	// MaxPorts bounds the enabled data ports plus the host port.
	MaxPorts          = 32
	MinVLAN           = 1
	MaxVLAN           = 4094
	minFDBSize        = 16
	maxFDBSize        = 1 << 22
	maxFDBAging       = 1000000 * time.Second // Linux's bridge maximum
	minConntrackSize  = 256
	maxConntrackSize  = 1 << 24
	maxTimeout        = 30 * 24 * time.Hour
	minConfirmTimeout = 5 * time.Second
	maxConfirmTimeout = time.Hour
	maxPortName       = 15 // IFNAMSIZ-1, as in rules
	maxComment        = 128
)

// Validate checks the whole config and returns every problem as an
// Errors, each at the JSON path of the offending field, or nil. env
// supplies the interfaces that exist on the box. Zero values of fields
// that have defaults are accepted (ApplyDefaults fills them).
func (c *Config) Validate(env Env) error {
	v := &validator{c: c, env: env, names: map[string]string{}, ifaces: map[string]string{}, wan: -1}
	if c.Version != Version {
		v.add("version", "is %d; want %d (Parse migrates older versions)", c.Version, Version)
	}
	switch c.Mode {
	case ModeBridge, ModeNAT, "":
	default:
		v.add("mode", "want bridge or nat, got %q", c.Mode)
	}
	switch c.FastPath {
	case FastPathAuto, FastPathTCX, FastPathXDP, FastPathOff, "":
	default:
		v.add("fastPath", "want auto, tcx, xdp or off, got %q", c.FastPath)
	}
	v.ports()
	v.hostPort()
	if c.Mode == ModeNAT {
		v.natRoles()
		v.natPorts()
	}
	v.addresses()
	v.bridge()
	if c.Mode == ModeNAT {
		v.nat()
	}
	v.rules()
	v.tuning()
	v.dashboard()
	v.services()
	return v.err()
}

type validator struct {
	errs
	c      *Config
	env    Env
	names  map[string]string // port name -> path of its first use
	ifaces map[string]string // interface -> path of its first use
	wan    int               // index of the WAN port in NAT mode, -1 if none
}

func (v *validator) known(ifname string) bool {
	return v.env.Interfaces == nil || slices.Contains(v.env.Interfaces, ifname)
}

func (v *validator) interfaceList() string {
	l := slices.Sorted(slices.Values(v.env.Interfaces))
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// portNames lists the names usable in rules and FDB entries.
func (v *validator) portNames() []string {
	return slices.Sorted(maps.Keys(v.names))
}

func (v *validator) name(at, name string) {
	switch {
	case name == "":
		v.add(at, "missing; give the port a name like \"lan1\"")
	case len(name) > maxPortName:
		v.add(at, "%q is longer than %d characters", name, maxPortName)
	case strings.IndexFunc(name, func(r rune) bool { return !isNameChar(r) }) >= 0:
		v.add(at, "%q has characters other than letters, digits, '_', '.', '-'", name)
	default:
		if first, dup := v.names[name]; dup {
			v.add(at, "duplicate port name %q (already at %s)", name, first)
			return
		}
		v.names[name] = at
	}
}

func (v *validator) ifname(at, name string) bool {
	switch {
	case name == "":
		v.add(at, "missing; want a network interface like \"eth1\"")
	case len(name) > maxPortName || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n\x00"):
		v.add(at, "%q is not a valid interface name", name)
	default:
		if first, dup := v.ifaces[name]; dup {
			v.add(at, "interface %q is already used at %s", name, first)
			return false
		}
		v.ifaces[name] = at
		return true
	}
	return false
}

func isNameChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

func (v *validator) ports() {
	enabled := 0
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		at := index("ports", i)
		v.name(join(at, "name"), p.Name)
		if v.ifname(join(at, "interface"), p.Interface) && p.IsEnabled() && !v.known(p.Interface) {
			v.add(join(at, "interface"), "unknown interface %q (this box has: %s); fix the name or set enabled to false", p.Interface, v.interfaceList())
		}
		switch p.Role {
		case RoleNone, RoleLAN, RoleWAN:
		default:
			v.add(join(at, "role"), "want lan or wan, got %q", p.Role)
		}
		if p.MTU != 0 && (p.MTU < MinMTU || p.MTU > MaxMTU) {
			v.add(join(at, "mtu"), "%d out of range %d..%d", p.MTU, MinMTU, MaxMTU)
		}
		v.vlans(join(at, "vlans"), p.VLANs)
		if p.IsEnabled() {
			enabled++
		}
	}
	if enabled == 0 {
		v.add("ports", "no enabled port; add a port like {\"name\": \"port1\", \"interface\": \"eth1\"}")
	}
	if v.c.HostPort != nil {
		enabled++
	}
	if enabled > MaxPorts {
		v.add("ports", "%d enabled ports (the host port included); the dataplane runs at most %d", enabled, MaxPorts)
	}
}

func (v *validator) vlans(at string, vl VLANs) {
	if vl.Native != 0 && (vl.Native < MinVLAN || vl.Native > MaxVLAN) {
		v.add(join(at, "native"), "VLAN %d out of range %d..%d (0: no native VLAN)", vl.Native, MinVLAN, MaxVLAN)
	}
	seen := map[uint16]int{}
	for i, id := range vl.Allowed {
		a := index(join(at, "allowed"), i)
		switch j, dup := seen[id]; {
		case id < MinVLAN || id > MaxVLAN:
			v.add(a, "VLAN %d out of range %d..%d", id, MinVLAN, MaxVLAN)
		case dup:
			v.add(a, "VLAN %d already listed at allowed[%d]", id, j)
		case id == vl.Native:
			v.add(a, "VLAN %d is the native VLAN (carried untagged); remove it from allowed", id)
		}
		seen[id] = i
	}
}

func (v *validator) hostPort() {
	h := v.c.HostPort
	if h == nil {
		return
	}
	if h.Name != "" {
		v.name("hostPort.name", h.Name)
	}
	if h.Interface != "" {
		v.ifname("hostPort.interface", h.Interface)
	}
}

// natRoles checks that NAT mode has one WAN port and LAN ports.
func (v *validator) natRoles() {
	lan := 0
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		if !p.IsEnabled() {
			continue
		}
		switch p.Role {
		case RoleNone:
			v.add(index("ports", i)+".role", "missing; NAT mode needs every enabled port to be lan or wan")
		case RoleWAN:
			if v.wan >= 0 {
				v.add(index("ports", i)+".role", "NAT mode needs exactly one WAN port; ports[%d] is already wan", v.wan)
			} else {
				v.wan = i
			}
		case RoleLAN:
			lan++
		}
	}
	if v.wan < 0 {
		v.add("ports", "NAT mode needs exactly one enabled port with role wan, found none")
	}
	if lan == 0 {
		v.add("ports", "NAT mode needs at least one enabled port with role lan")
	}
}

// natPorts checks what the router needs of its ports: untagged (no
// VLANs), an MTU of at least MinNATMTU, one IPv4 address per side.
func (v *validator) natPorts() {
	var lanAddr string // path of the LAN address
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		at := index("ports", i)
		if !p.IsEnabled() {
			continue
		}
		if !p.VLANs.IsZero() {
			v.add(join(at, "vlans"), "VLAN-aware ports are for bridge mode; the NAT router's ports are untagged")
		}
		if p.MTU >= MinMTU && p.MTU < MinNATMTU {
			v.add(join(at, "mtu"), "%d is below %d, the smallest MTU of a router port", p.MTU, MinNATMTU)
		}
		wanAddr := ""
		for j, a := range p.Addresses {
			aat := index(join(at, "addresses"), j)
			switch {
			case !a.IsValid():
			case !a.Addr().Is4():
				v.add(aat, "%s: NAT mode routes IPv4 only; an IPv6 address on a router port is not supported", a)
			case a.Bits() < 8 || a.Bits() > 30:
				v.add(aat, "%s: the router's subnets are /8 to /30", a)
			case p.Role == RoleWAN && wanAddr != "":
				v.add(aat, "the router has one WAN address (%s already); the first is the masquerade address", wanAddr)
			case p.Role == RoleWAN:
				wanAddr = aat
			case p.Role == RoleLAN && lanAddr != "":
				v.add(aat, "the router has one LAN address (%s already); the LAN ports form one segment", lanAddr)
			case p.Role == RoleLAN:
				lanAddr = aat
			}
		}
	}
}

// segment names the L2 segment a port's addresses live on: addresses on
// different segments must not overlap.
func (v *validator) segment(p *Port) string {
	switch {
	case v.c.Mode != ModeNAT:
		return "bridge"
	case p.IsEnabled() && p.Role == RoleWAN:
		return "wan"
	case p.IsEnabled() && p.Role == RoleLAN:
		return "lan"
	}
	return "port " + p.Name
}

type addrUse struct {
	path, segment string
	p             netip.Prefix
}

func (v *validator) addresses() {
	var all []addrUse
	check := func(at, segment string, list []netip.Prefix) {
		for i, p := range list {
			a := index(at, i)
			if msg := checkPrefix(p); msg != "" {
				v.add(a, "%s", msg)
				continue
			}
			if msg := conflict(all, segment, p); msg != "" {
				v.add(a, "%s", msg)
			}
			all = append(all, addrUse{a, segment, p})
		}
	}
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		at := index("ports", i) + ".addresses"
		if (v.c.Mode == ModeBridge || v.c.Mode == "") && len(p.Addresses) > 0 {
			v.add(at, "bridge mode forwards transparently and gives data ports no addresses; put the box's address on hostPort.addresses")
			continue
		}
		check(at, v.segment(p), p.Addresses)
	}
	if h := v.c.HostPort; h != nil {
		seg := "bridge"
		if v.c.Mode == ModeNAT {
			seg = "lan"
		}
		check("hostPort.addresses", seg, h.Addresses)
	}
}

// conflict describes the first clash of p with the addresses in use: the
// same address twice, or overlapping subnets on different segments.
func conflict(used []addrUse, segment string, p netip.Prefix) string {
	for _, o := range used {
		switch {
		case o.p.Addr() == p.Addr():
			return fmt.Sprintf("address %s is already used at %s", p.Addr(), o.path)
		case o.segment != segment && o.p.Overlaps(p):
			return fmt.Sprintf("%s overlaps %s at %s, which is on another segment (%s, not %s)", p, o.p, o.path, o.segment, segment)
		}
	}
	return ""
}

// checkPrefix checks an interface address with its prefix length.
func checkPrefix(p netip.Prefix) string {
	a := p.Addr()
	switch {
	case !p.IsValid():
		return "missing; want an address with a prefix length like \"192.168.1.1/24\""
	case a.Is4In6():
		return fmt.Sprintf("%s: write IPv4 addresses as IPv4 (%s/%d)", p, a.Unmap(), p.Bits()-96)
	case p.Bits() == 0:
		return fmt.Sprintf("%s: prefix length /0 is not a subnet; want e.g. /24", p)
	case a.IsUnspecified() || a.IsLoopback() || a.IsMulticast():
		return fmt.Sprintf("%s is not a host address (unspecified, loopback or multicast)", p)
	case a.Is4() && p.Bits() < 31:
		if a == p.Masked().Addr() {
			return fmt.Sprintf("%s is the network address of %s; use a host address like %s", a, p.Masked(), p.Masked().Addr().Next())
		}
		if a == lastAddr(p) {
			return fmt.Sprintf("%s is the broadcast address of %s", a, p.Masked())
		}
	}
	return ""
}

// lastAddr returns the last address of p's subnet.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func (v *validator) bridge() {
	b := &v.c.Bridge
	if b.FDBAging != 0 && (b.FDBAging.D() < time.Second || b.FDBAging.D() > maxFDBAging) {
		v.add("bridge.fdbAging", "%s out of range 1s..%s", b.FDBAging, Duration(maxFDBAging))
	}
	if b.FDBSize != 0 && (b.FDBSize < minFDBSize || b.FDBSize > maxFDBSize) {
		v.add("bridge.fdbSize", "%d out of range %d..%d", b.FDBSize, minFDBSize, maxFDBSize)
	}
	switch b.FDBFull {
	case "", FDBEvict, FDBRefuse:
	default:
		v.add("bridge.fdbFull", "unknown policy %q; want %q or %q", b.FDBFull, FDBEvict, FDBRefuse)
	}
	if size := b.size(); len(b.Static) > size {
		v.add("bridge.static", "%d entries do not fit into fdbSize %d", len(b.Static), size)
	}
	type key struct {
		mac  rules.MAC
		vlan uint16
	}
	seen := map[key]int{}
	for i, s := range b.Static {
		at := index("bridge.static", i)
		switch {
		case s.MAC == rules.MAC{}:
			v.add(at+".mac", "missing; want a unicast MAC like \"02:00:5e:10:00:01\"")
		case s.MAC[0]&1 != 0:
			v.add(at+".mac", "%s is a multicast address; static entries are for unicast addresses", s.MAC)
		}
		if _, ok := v.names[s.Port]; !ok {
			v.add(at+".port", "unknown port %q (ports: %s)", s.Port, strings.Join(v.portNames(), ", "))
		}
		if s.VLAN > MaxVLAN {
			v.add(at+".vlan", "VLAN %d out of range %d..%d (0: untagged)", s.VLAN, MinVLAN, MaxVLAN)
		}
		k := key{s.MAC, s.VLAN}
		if j, dup := seen[k]; dup {
			v.add(at, "duplicate entry for %s (VLAN %d), already at bridge.static[%d]", s.MAC, s.VLAN, j)
		}
		seen[k] = i
	}
}

func (v *validator) nat() {
	n := &v.c.NAT
	var wanPrefixes, lanPrefixes []netip.Prefix
	var lanAt string
	for i := range v.c.Ports {
		p := &v.c.Ports[i]
		if !p.IsEnabled() {
			continue
		}
		for _, a := range p.Addresses {
			if !a.Addr().Is4() {
				continue
			}
			switch p.Role {
			case RoleWAN:
				wanPrefixes = append(wanPrefixes, a)
			case RoleLAN:
				lanPrefixes = append(lanPrefixes, a)
			}
		}
		if p.Role == RoleLAN && lanAt == "" {
			lanAt = index("ports", i) + ".addresses"
		}
	}
	if v.wan >= 0 {
		wan := &v.c.Ports[v.wan]
		at := index("ports", v.wan) + ".addresses"
		switch {
		case n.WANDHCP && len(wan.Addresses) > 0:
			v.add(at, "nat.wanDHCP is on, so DHCP gives the WAN address; remove these addresses or turn wanDHCP off")
		case !n.WANDHCP && len(wanPrefixes) == 0:
			v.add(at, "the WAN port needs a static IPv4 address like \"203.0.113.2/24\" (or set nat.wanDHCP)")
		}
	}
	switch {
	case n.WANDHCP && n.Gateway.IsValid():
		v.add("nat.gateway", "nat.wanDHCP is on, so DHCP gives the gateway; remove it")
	case n.WANDHCP:
	case !n.Gateway.IsValid():
		v.add("nat.gateway", "missing; a static WAN address needs the IPv4 address of the upstream router")
	case !n.Gateway.Is4():
		v.add("nat.gateway", "%s is not an IPv4 address", n.Gateway)
	case len(wanPrefixes) > 0 && !slices.ContainsFunc(wanPrefixes, func(p netip.Prefix) bool { return p.Contains(n.Gateway) }):
		v.add("nat.gateway", "%s is not in the WAN subnet %s", n.Gateway, wanPrefixes[0].Masked())
	case slices.ContainsFunc(wanPrefixes, func(p netip.Prefix) bool { return p.Addr() == n.Gateway }):
		v.add("nat.gateway", "%s is the box's own WAN address", n.Gateway)
	}
	if len(lanPrefixes) == 0 && lanAt != "" {
		v.add(lanAt, "NAT mode needs the router's LAN address (an IPv4 address like \"192.168.1.1/24\") on a LAN port")
	}
	v.portRange("nat.masqueradePorts", n.MasqueradePorts, true)
	if s := n.Conntrack.Size; s != 0 && (s < minConntrackSize || s > maxConntrackSize) {
		v.add("nat.conntrack.size", "%d out of range %d..%d", s, minConntrackSize, maxConntrackSize)
	}
	for _, f := range n.Conntrack.Timeouts.fields() {
		if d := f.d.D(); d != 0 && (d < time.Second || d > maxTimeout) {
			v.add("nat.conntrack.timeouts."+f.name, "%s out of range 1s..%s", *f.d, Duration(maxTimeout))
		}
	}
	for i := range n.Forwards {
		v.forward(i, lanPrefixes)
	}
}

func (v *validator) portRange(at string, r PortRange, zeroOK bool) bool {
	switch {
	case r == (PortRange{}) && zeroOK:
	case r.First == 0:
		v.add(at, "port 0 is not usable; want ports 1..65535 like \"1024-65535\"")
	case r.First > r.Last:
		v.add(at, "range %d-%d is reversed (want %d-%d)", r.First, r.Last, r.Last, r.First)
	default:
		return true
	}
	return false
}

func (v *validator) forward(i int, lan []netip.Prefix) {
	n := &v.c.NAT
	f := &n.Forwards[i]
	at := index("nat.forwards", i)
	if f.Proto != "tcp" && f.Proto != "udp" {
		v.add(at+".proto", "want tcp or udp, got %q", f.Proto)
	}
	if v.portRange(at+".wanPorts", f.WANPorts, false) {
		for j := range i {
			g := &n.Forwards[j]
			if g.Proto == f.Proto && g.WANPorts.First != 0 && g.WANPorts.First <= g.WANPorts.Last && g.WANPorts.Overlaps(f.WANPorts) {
				v.add(at+".wanPorts", "%s %s collides with nat.forwards[%d] (%s %s)", f.Proto, f.WANPorts, j, g.Proto, g.WANPorts)
				break
			}
		}
		if f.LANPort != 0 && int(f.LANPort)+f.WANPorts.Len()-1 > 65535 {
			v.add(at+".lanPort", "the range %d-%d (one port per WAN port) ends past 65535", f.LANPort, int(f.LANPort)+f.WANPorts.Len()-1)
		}
	}
	switch h := f.LANHost; {
	case !h.IsValid():
		v.add(at+".lanHost", "missing; want the LAN host's IPv4 address")
	case !h.Is4():
		v.add(at+".lanHost", "%s is not an IPv4 address (NAT is IPv4 only)", h)
	case slices.ContainsFunc(lan, func(p netip.Prefix) bool { return p.Addr() == h }):
		v.add(at+".lanHost", "%s is the router's own LAN address", h)
	case slices.ContainsFunc(lan, func(p netip.Prefix) bool { return p.Masked().Addr() == h || lastAddr(p) == h }):
		v.add(at+".lanHost", "%s is the network or broadcast address of the LAN", h)
	case len(lan) > 0 && !slices.ContainsFunc(lan, func(p netip.Prefix) bool { return p.Contains(h) }):
		subnets := make([]string, len(lan))
		for k, p := range lan {
			subnets[k] = p.Masked().String()
		}
		v.add(at+".lanHost", "%s is not in the LAN (%s)", h, strings.Join(subnets, ", "))
	}
	if len(f.Comment) > maxComment {
		v.add(at+".comment", "longer than %d bytes", maxComment)
	}
}

func (v *validator) rules() {
	ids := map[string]uint16{}
	for _, name := range v.portNames() {
		ids[name] = uint16(len(ids))
	}
	_, err := rules.Compile(&v.c.Rules, rules.Options{Ports: ids})
	var list rules.ErrorList
	switch {
	case errors.As(err, &list):
		for _, re := range list {
			v.add(rulePath(re), "%s", re.Msg)
		}
	case err != nil:
		v.add("rules", "%v", err)
	}
}

// rulePath maps a rules error to its path in the config.
func rulePath(e *rules.Error) string {
	at := "rules"
	if e.Rule >= 0 {
		at = index("rules.rules", e.Rule)
	}
	if e.Field != "" {
		at = join(at, e.Field)
	}
	return at
}

func (v *validator) tuning() {
	for _, err := range leafErrors(v.c.Tuning.Validate()) {
		path, msg, ok := strings.Cut(err.Error(), ": ")
		if !ok || strings.ContainsAny(path, " \t\"") {
			v.add("tuning", "%v", err)
			continue
		}
		v.add("tuning."+path, "%s", msg)
	}
	host := ""
	if v.c.HostPort != nil {
		host = v.c.HostPort.Interface
		if host == "" {
			host = DefaultHostPortInterface
		}
	}
	for i, p := range v.c.Tuning.Ports {
		if p.Name != "" && p.Name != host && !v.known(p.Name) {
			v.add(index("tuning.ports", i)+".name", "unknown interface %q (this box has: %s)", p.Name, v.interfaceList())
		}
	}
}

// leafErrors flattens errors.Join trees.
func leafErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}

func (v *validator) dashboard() {
	d := &v.c.Dashboard
	if d.Listen != "" {
		host, port, err := net.SplitHostPort(d.Listen)
		n, perr := strconv.ParseUint(port, 10, 16)
		switch {
		case err != nil:
			v.add("dashboard.listen", "%q is not a listen address; want \":8080\" or \"192.168.1.2:8080\"", d.Listen)
		case perr != nil || n == 0:
			v.add("dashboard.listen", "port %q: want a number 1..65535", port)
		case host != "":
			if _, err := netip.ParseAddr(host); err != nil {
				v.add("dashboard.listen", "host %q: want an IP address or nothing (all addresses)", host)
			}
		}
	}
	if t := d.ConfirmTimeout.D(); t != 0 && (t < minConfirmTimeout || t > maxConfirmTimeout) {
		v.add("dashboard.confirmTimeout", "%s out of range %s..%s", d.ConfirmTimeout, Duration(minConfirmTimeout), Duration(maxConfirmTimeout))
	}
	if d.UpdateKey != "" && d.UpdatePublicKey() == nil {
		v.add("dashboard.updateKey", "not an ed25519 public key: want the base64 of its 32 bytes (the .pub file of `firmware keygen`)")
	}
	if p := d.InternetProbe; p != "" {
		if a, err := netip.ParseAddr(p); err == nil && !a.Is4() {
			v.add("dashboard.internetProbe", "%s: the probe pings IPv4; want an IPv4 address or a host name", p)
		} else if err != nil && !isDomain(p) {
			v.add("dashboard.internetProbe", "%q is neither an IPv4 address nor a host name", p)
		}
	}
}

// Limits of the router services.
const (
	minLeaseTime   = 2 * time.Minute
	maxLeaseTime   = 30 * 24 * time.Hour
	maxDNSCache    = 1000000
	maxUpstreams   = 8
	maxNTPServers  = 8
	maxStaticLease = 4096
)

// services checks the DHCP and DNS servers and the NTP client.
func (v *validator) services() {
	c := v.c
	if c.Mode != ModeNAT {
		return // the services are the NAT router's: bridge mode ignores them, as it does the nat section
	}
	if (c.DHCP.IsEnabled() || c.DNS.IsEnabled()) && c.HostPort == nil {
		v.add("hostPort", "the router's DHCP and DNS servers run on the host port; add \"hostPort\": {}")
	}
	if c.IPv6.IsEnabled() && c.HostPort == nil {
		v.add("ipv6.enabled", "the router advertisements come from the box's stack on the host port; add \"hostPort\": {} or turn IPv6 off")
	}
	if n := c.IPv6.PrefixLength; n != 0 && (n < 48 || n > 64) {
		v.add("ipv6.prefixLength", "%d is not a delegated prefix length of 48 to 64", n)
	}
	switch c.IPv6.WANAddress {
	case WANAddressAuto, WANAddressSLAAC, WANAddressDHCPv6, WANAddressOff, "":
	default:
		v.add("ipv6.wanAddress", "want auto, slaac, dhcpv6 or off, got %q", c.IPv6.WANAddress)
	}
	v.ipv6Static()
	lan, router := v.lanPrefix()
	d := &c.DHCP
	if t := d.LeaseTime.D(); t != 0 && (t < minLeaseTime || t > maxLeaseTime) {
		v.add("dhcp.leaseTime", "%s out of range %s..%s", d.LeaseTime, Duration(minLeaseTime), Duration(maxLeaseTime))
	}
	if !d.Range.IsZero() {
		v.addrRange("dhcp.range", d.Range, lan, router)
	}
	if len(d.Static) > maxStaticLease {
		v.add("dhcp.static", "%d entries, at most %d", len(d.Static), maxStaticLease)
	}
	macs, addrs := map[rules.MAC]int{}, map[netip.Addr]int{}
	for i, s := range d.Static {
		at := index("dhcp.static", i)
		switch {
		case s.MAC == rules.MAC{}:
			v.add(at+".mac", "missing; want the device's MAC like \"02:00:5e:10:00:01\"")
		case s.MAC[0]&1 != 0:
			v.add(at+".mac", "%s is a multicast address", s.MAC)
		default:
			if j, dup := macs[s.MAC]; dup {
				v.add(at+".mac", "%s already has a static lease at dhcp.static[%d]", s.MAC, j)
			}
			macs[s.MAC] = i
		}
		if v.lanHostAddr(at+".address", s.Address, lan, router) {
			if j, dup := addrs[s.Address]; dup {
				v.add(at+".address", "%s is already given to dhcp.static[%d]", s.Address, j)
			}
			addrs[s.Address] = i
		}
		if s.Hostname != "" && !isLabel(s.Hostname) {
			v.add(at+".hostname", "%q is not a DNS label (letters, digits and '-', 1-63, not starting or ending with '-')", s.Hostname)
		}
	}
	n := &c.DNS
	if n.Domain != "" && !isDomain(n.Domain) {
		v.add("dns.domain", "%q is not a domain name like \"lan\" or \"home.arpa\"", n.Domain)
	}
	if n.CacheSize < 0 || n.CacheSize > maxDNSCache {
		v.add("dns.cacheSize", "%d out of range 0..%d", n.CacheSize, maxDNSCache)
	}
	if len(n.Upstreams) > maxUpstreams {
		v.add("dns.upstreams", "%d servers, at most %d", len(n.Upstreams), maxUpstreams)
	}
	for i, u := range n.Upstreams {
		at := index("dns.upstreams", i)
		switch {
		case !u.IsValid():
			v.add(at, "missing; want a DNS server's address like \"9.9.9.9\"")
		case u.IsUnspecified() || u.IsLoopback() || u.IsMulticast() || u.IsLinkLocalUnicast():
			v.add(at, "%s is not a DNS server's address", u)
		case router.IsValid() && u == router:
			v.add(at, "%s is the router itself", u)
		case u.Is6() && !u.Is4In6():
			v.add(at, "%s is an IPv6 address: the box's own stack reaches the WAN over IPv4 only (its IPv6 is routed for the LAN's hosts); give an IPv4 address", u)
		}
	}
	if len(c.Time.Servers) > maxNTPServers {
		v.add("time.servers", "%d servers, at most %d", len(c.Time.Servers), maxNTPServers)
	}
	for i, s := range c.Time.Servers {
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil && !isDomain(s):
			v.add(index("time.servers", i), "%q is neither an address nor a host name", s)
		case err == nil && a.Is6() && !a.Is4In6():
			v.add(index("time.servers", i), "%s is an IPv6 address: the box's own stack reaches the WAN over IPv4 only; give an IPv4 address or a host name", s)
		}
	}
}

// lanPrefix returns the router's LAN prefix and address in NAT mode.
func (v *validator) lanPrefix() (netip.Prefix, netip.Addr) {
	if a := v.c.RouterLAN(); a.IsValid() {
		return a.Masked(), a.Addr()
	}
	return netip.Prefix{}, netip.Addr{}
}

// lanHostAddr checks that a is a host address of the LAN subnet other
// than the router's.
func (v *validator) lanHostAddr(at string, a netip.Addr, lan netip.Prefix, router netip.Addr) bool {
	switch {
	case !a.IsValid():
		v.add(at, "missing; want an IPv4 address of the LAN")
	case !a.Is4():
		v.add(at, "%s is not an IPv4 address", a)
	case !lan.IsValid():
	case !lan.Contains(a):
		v.add(at, "%s is not in the LAN %s", a, lan)
	case a == router:
		v.add(at, "%s is the router's own LAN address", a)
	case a == lan.Addr() || a == lastAddr(lan):
		v.add(at, "%s is the network or broadcast address of the LAN", a)
	default:
		return true
	}
	return false
}

// addrRange checks the DHCP pool.
func (v *validator) addrRange(at string, r AddrRange, lan netip.Prefix, router netip.Addr) {
	if !v.lanHostAddr(at, r.First, lan, router) || !v.lanHostAddr(at, r.Last, lan, router) {
		return
	}
	if r.Last.Less(r.First) {
		v.add(at, "range %s is reversed (want %s-%s)", r, r.Last, r.First)
	}
	if !router.Less(r.First) && !r.Last.Less(router) {
		v.add(at, "range %s contains the router's address %s", r, router)
	}
}

// isLabel reports whether s is a DNS label (RFC 1123 host name part).
func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isDomain reports whether s is a domain name of DNS labels.
func isDomain(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isLabel(l) {
			return false
		}
	}
	return true
}

// ipv6Static checks the static IPv6 prefix and the WAN's IPv6 next hop.
func (v *validator) ipv6Static() {
	s := &v.c.IPv6
	if p := s.Prefix; p.IsValid() {
		a := p.Addr()
		switch {
		case !a.Is6() || a.Is4In6():
			v.add("ipv6.prefix", "%s is not an IPv6 prefix", p)
		case p.Bits() < 48 || p.Bits() > 64:
			v.add("ipv6.prefix", "%s: /%d is not a delegated prefix length of 48 to 64", p, p.Bits())
		case !a.IsGlobalUnicast():
			v.add("ipv6.prefix", "%s is not a global unicast prefix", p)
		case p != p.Masked():
			v.add("ipv6.prefix", "%s has bits set after its /%d; want %s", p, p.Bits(), p.Masked())
		}
	}
	if g := s.Gateway; g.IsValid() {
		switch {
		case !g.Is6() || g.Is4In6():
			v.add("ipv6.gateway", "%s is not an IPv6 address", g)
		case g.Zone() != "":
			v.add("ipv6.gateway", "%s: no zone; the next hop is on the WAN port", g)
		case g.IsMulticast():
			v.add("ipv6.gateway", "%s is a multicast address; want the ISP router's link-local or global address", g)
		case !g.IsLinkLocalUnicast() && !g.IsGlobalUnicast():
			v.add("ipv6.gateway", "%s is not a unicast address; want the ISP router's link-local or global address", g)
		case s.Prefix.IsValid() && s.Prefix.Masked().Contains(g):
			v.add("ipv6.gateway", "%s is inside ipv6.prefix %s, which is routed to the LAN; the next hop is on the WAN", g, s.Prefix.Masked())
		}
	}
}
