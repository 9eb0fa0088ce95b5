package config

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

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

// Validate checks the whole config and returns every problem as an
// Errors, each at the JSON path of the offending field, or nil. env
// supplies the interfaces that exist on the box. Zero values of fields
// that have defaults are accepted (ApplyDefaults fills them).
//
// The sections are checked in this order, which is the order of the
// errors: the ports come first because they define the names and
// interfaces the later sections refer to.
func (c *Config) Validate(env Env) error {
	v := &validator{c: c, env: env, names: map[string]string{}, ifaces: map[string]string{}, wan: -1}
	v.document()
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
		v.wanLink()
		v.forwards()
	}
	v.pppoe()
	v.rules()
	v.tuning()
	v.dashboard()
	// The router services are the NAT router's: bridge mode ignores them,
	// as it does the nat section.
	if c.Mode == ModeNAT {
		v.servicesHostPort()
		v.ipv6()
		v.dhcp()
		v.dns()
		v.time()
	}
	return v.err()
}

// document checks the top-level fields.
func (v *validator) document() {
	c := v.c
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
}

// validator collects the problems of one Config. The sections' checks
// are its methods, each in the section's file.
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

// unicastMAC checks the MAC of a static entry (an FDB entry, a DHCP
// lease): set and not multicast. want names what is missing, suffix
// explains the multicast error.
func (v *validator) unicastMAC(at string, m rules.MAC, want, suffix string) bool {
	switch {
	case m == rules.MAC{}:
		v.add(at, "missing; want %s like \"02:00:5e:10:00:01\"", want)
	case m[0]&1 != 0:
		v.add(at, "%s is a multicast address%s", m, suffix)
	default:
		return true
	}
	return false
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
