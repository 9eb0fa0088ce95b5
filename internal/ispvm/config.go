package ispvm

import (
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"sort"
	"strings"
)

// Config is one ISP VM: its link, its PPPoE access concentrator and the
// upstream it offers. The zero value of a field takes the default named.
type Config struct {
	Netns string // the network namespace ("ip netns" name) holding Tap; "" = this process's
	Tap   string // the tap device the VM's NIC uses (required)
	MAC   string // the VM NIC's MAC address (default 52:54:00:15:50:01)

	VLAN        int    // the 802.1Q VLAN pppoe-server runs on (0: untagged)
	ACName      string // the AC-Name in PADO (default "ispvm")
	ServiceName string // the only Service-Name offered ("" = any)
	CHAP        bool   // require CHAP (MD5) instead of PAP
	User        string // the session's user name (default "e1kbox")
	Password    string // its password (default "secret")

	Local  netip.Addr // the ISP's IPCP address (default 10.64.0.1)
	Remote netip.Addr // the address IPCP gives the client (default 10.64.0.2)
	// DNS are the ISP's name servers: the IPv4 ones offered by IPCP
	// (ms-dns, only when asked), the IPv6 ones by DHCPv6. The VM's DNS
	// server (dnsmasq, no recursion) answers on each of them (added to
	// its lo unless it is Local) from a hosts file: UpstreamName (the
	// upstream host's addresses) and Hosts.
	DNS   []netip.Addr
	Hosts map[string][]netip.Addr // more names the DNS server answers
	// LCPEcho is the seconds between the server's LCP echo requests (0:
	// none); after 3 unanswered ones it ends the session.
	LCPEcho int
	// MRU is the MRU and MTU pppd allows (default 1492, at most 1492;
	// 1500 with KernelMode). RFC 4638's 1500 needs a kernel-mode server:
	// Debian's rp-pppoe 3.15 is built without one (no -k), and its
	// user-mode pty relay drops 1500-byte packets although both ends'
	// ppp0 then come up at MTU 1500 (measured with a pppd client at mru
	// 1500). Above 1492 the VM's eth0 runs at MTU MRU+8.
	MRU int
	// KernelMode runs the access concentrator acd (./acd) instead of
	// pppoe-server: discovery in Go, each session's pppd attached to it
	// in the kernel (rp-pppoe.so's pppoe-sess), so the session's packets
	// bypass a pty relay. With an MRU above 1492 it echoes a client's
	// PPP-Max-Payload (RFC 4638, capped to the MRU).
	KernelMode bool

	// Prefix is delegated over DHCPv6 on the session (default
	// 2001:db8:100::/56); the session's own /64 is Link6 (default
	// 2001:db8:ff::/64, the ISP ::1, IA_NA from ::100-::1ff).
	Prefix netip.Prefix
	Link6  netip.Prefix

	// Upstream4 and Upstream6 are the ISP's upstream host (default
	// 198.51.100.1 and 2001:db8:ffff::1): ping, HTTP on port 80 (/big:
	// BigSize bytes, Image.BigSHA256), and on port 9000 a sink that
	// answers with the hex SHA-256 of what it received once the client
	// closes its sending side.
	Upstream4 netip.Addr
	Upstream6 netip.Addr

	Debug   bool      // pppd debug logging and syslog on the console
	Console io.Writer // also gets the console output, if set

	// client makes the VM a PPPoE client of another ISP VM instead (this
	// package's test): pppd with the rp-pppoe plugin, persisting, LCP
	// echo every second (3 failures end the session), then dhclient -6 -P.
	client bool
}

// UpstreamName is the name the VM's DNS server answers with Upstream4
// and Upstream6.
const UpstreamName = "upstream.ispvm.test"

func (c *Config) defaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	defAddr := func(a *netip.Addr, v string) {
		if !a.IsValid() {
			*a = netip.MustParseAddr(v)
		}
	}
	def(&c.MAC, "52:54:00:15:50:01")
	def(&c.ACName, "ispvm")
	def(&c.User, "e1kbox")
	def(&c.Password, "secret")
	defAddr(&c.Local, "10.64.0.1")
	defAddr(&c.Remote, "10.64.0.2")
	defAddr(&c.Upstream4, "198.51.100.1")
	defAddr(&c.Upstream6, "2001:db8:ffff::1")
	if c.MRU == 0 {
		c.MRU = 1492
	}
	if !c.Prefix.IsValid() {
		c.Prefix = netip.MustParsePrefix("2001:db8:100::/56")
	}
	if !c.Link6.IsValid() {
		c.Link6 = netip.MustParsePrefix("2001:db8:ff::/64")
	}
}

// ServerAddr6 is the ISP's address on the session's /64 (Link6's ::1).
func (c *Config) ServerAddr6() netip.Addr {
	a := c.Link6.Masked().Addr().As16()
	a[15] = 1
	return netip.AddrFrom16(a)
}

func (c *Config) validate() error {
	switch {
	case c.Tap == "":
		return fmt.Errorf("ispvm: no tap device")
	case !validMAC(c.MAC):
		return fmt.Errorf("ispvm: MAC %q is not a unicast Ethernet address", c.MAC)
	case c.VLAN < 0 || c.VLAN > 4094:
		return fmt.Errorf("ispvm: VLAN %d out of 0-4094", c.VLAN)
	case c.LCPEcho < 0:
		return fmt.Errorf("ispvm: LCPEcho %d is negative", c.LCPEcho)
	case c.MRU < 128 || c.MRU > 1492 && !c.KernelMode:
		return fmt.Errorf("ispvm: MRU %d out of 128-1492 (Debian's pppoe-server has no kernel mode for RFC 4638: KernelMode)", c.MRU)
	case c.MRU > 1500:
		return fmt.Errorf("ispvm: MRU %d above RFC 4638's 1500", c.MRU)
	case !c.Local.Is4() || !c.Remote.Is4() || !c.Upstream4.Is4():
		return fmt.Errorf("ispvm: Local, Remote and Upstream4 must be IPv4 addresses")
	case !c.Prefix.Addr().Is6() || !c.Link6.Addr().Is6() || c.Link6.Bits() != 64 || !c.Upstream6.Is6():
		return fmt.Errorf("ispvm: Prefix must be IPv6, Link6 an IPv6 /64, Upstream6 an IPv6 address")
	}
	for name, addrs := range c.Hosts {
		if !validHostName(name) || len(addrs) == 0 {
			return fmt.Errorf("ispvm: Hosts: %q is no host name with addresses", name)
		}
	}
	for _, s := range []string{c.ACName, c.ServiceName, c.User, c.Password} {
		if strings.ContainsAny(s, "\"\\\n\x00") {
			return fmt.Errorf("ispvm: %q: names and secrets may not hold quotes, backslashes or newlines", s)
		}
	}
	return nil
}

// validHostName reports whether s is a DNS name a hosts file can hold.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

// hostsFile is the VM's DNS server's hosts file: UpstreamName, then
// Hosts in name order.
func hostsFile(c *Config) string {
	var b strings.Builder
	for _, a := range []netip.Addr{c.Upstream4, c.Upstream6} {
		fmt.Fprintf(&b, "%s %s\n", a, UpstreamName)
	}
	names := make([]string, 0, len(c.Hosts))
	for n := range c.Hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, a := range c.Hosts[n] {
			fmt.Fprintf(&b, "%s %s\n", a, n)
		}
	}
	return b.String()
}

// dnsAddrs are the DNS addresses the VM puts on its lo: all but Local
// (ppp0's while a session is up).
func dnsAddrs(c *Config) string {
	var l []string
	for _, d := range c.DNS {
		if d != c.Local && d != c.Upstream4 && d != c.Upstream6 {
			l = append(l, d.String())
		}
	}
	return strings.Join(l, " ")
}

func validMAC(s string) bool {
	m, err := net.ParseMAC(s)
	return err == nil && len(m) == 6 && m[0]&1 == 0
}

//go:embed rootfs
var rootfs embed.FS

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// runArchive is the cpio archive appended to the base initramfs for one
// run: the scripts and the configuration.
func runArchive(c *Config) ([]byte, error) {
	var buf bytes.Buffer
	w := newCPIO(&buf)
	err := fs.WalkDir(rootfs, "rootfs", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "rootfs" {
			return err
		}
		name := strings.TrimPrefix(p, "rootfs/")
		if d.IsDir() {
			w.Dir(name, 0o755)
			return nil
		}
		b, err := rootfs.ReadFile(p)
		if err != nil {
			return err
		}
		perm := fs.FileMode(0o755)
		if name == "etc/inittab" {
			perm = 0o644
		}
		w.File(name, perm, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ispvm: scripts: %w", err)
	}
	debug := 0
	if c.Debug {
		debug = 1
	}
	kernel := 0
	if c.KernelMode && !c.client {
		kernel = 1
		if err := addACD(w); err != nil {
			return nil, err
		}
	}
	role := "isp"
	if c.client {
		role = "client"
	}
	env := strings.Join([]string{
		"ROLE=" + role, "PPPUSER=" + shellQuote(c.User), "PPPPASS=" + shellQuote(c.Password), fmt.Sprintf("MRU=%d", c.MRU),
		fmt.Sprintf("VLAN=%d", c.VLAN), "ACNAME=" + shellQuote(c.ACName),
		"SERVICE=" + shellQuote(c.ServiceName), "LOCAL=" + c.Local.String(), "REMOTE=" + c.Remote.String(),
		"UPSTREAM4=" + c.Upstream4.String(), "UPSTREAM6=" + c.Upstream6.String(), "PD=" + c.Prefix.Masked().String(),
		"LINK6=" + c.ServerAddr6().String(), fmt.Sprintf("DEBUG=%d", debug), "DNSADDRS=" + shellQuote(dnsAddrs(c)),
		fmt.Sprintf("KERNEL=%d", kernel),
	}, "\n") + "\n"
	w.File("etc/ispvm/env", 0o644, []byte(env))

	auth := "require-pap"
	secrets := "etc/ppp/pap-secrets"
	if c.CHAP {
		auth, secrets = "require-chap", "etc/ppp/chap-secrets"
	}
	// The address column must be "*": pppd refuses IPCP without one.
	w.File(secrets, 0o600, fmt.Appendf(nil, "\"%s\" * \"%s\" *\n", c.User, c.Password))
	opts := []string{auth, "mru " + fmt.Sprint(c.MRU), "mtu " + fmt.Sprint(c.MRU), "noccp", "novj", "+ipv6", "ipv6 ::1,::2",
		fmt.Sprintf("lcp-echo-interval %d", c.LCPEcho), "lcp-echo-failure 3", "nodefaultroute", "noproxyarp"}
	for _, d := range c.DNS {
		if d.Is4() {
			opts = append(opts, "ms-dns "+d.String())
		}
	}
	if c.Debug {
		opts = append(opts, "debug")
	}
	w.File("etc/ppp/isp-options", 0o644, []byte(strings.Join(opts, "\n")+"\n"))
	w.File("etc/ppp/options", 0o644, nil)
	w.File("etc/ispvm/dibbler.conf", 0o644, []byte(dibblerConf(c)))
	w.File("etc/ispvm/hosts", 0o644, []byte(hostsFile(c)))
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// dibblerConf is dibbler-server's configuration for the session's
// interface (@IFACE@, filled in by ipv6-up): IA_NA from the session's
// /64, the one delegated prefix, and the IPv6 DNS servers.
func dibblerConf(c *Config) string {
	link := c.Link6.Masked().Addr().As16()
	first, last := link, link
	first[14], first[15] = 0x01, 0x00
	last[14], last[15] = 0x01, 0xff
	var b strings.Builder
	fmt.Fprintf(&b, "log-level 7\nlog-mode short\niface \"@IFACE@\" {\n")
	fmt.Fprintf(&b, "\tT1 150\n\tT2 240\n\tprefered-lifetime 300\n\tvalid-lifetime 600\n")
	var dns []string
	for _, d := range c.DNS {
		if d.Is6() {
			dns = append(dns, d.String())
		}
	}
	if len(dns) > 0 {
		fmt.Fprintf(&b, "\toption dns-server %s\n", strings.Join(dns, ","))
	}
	fmt.Fprintf(&b, "\tclass {\n\t\tpool %s-%s\n\t}\n", netip.AddrFrom16(first), netip.AddrFrom16(last))
	pd := c.Prefix.Masked()
	fmt.Fprintf(&b, "\tpd-class {\n\t\tpd-pool %s\n\t\tpd-length %d\n\t}\n}\n", pd, pd.Bits())
	return b.String()
}
