package webui

// FormSection is one group of fields of the config page's form. The page
// edits the config JSON in place through these paths, so members the form
// does not know survive an edit.
type FormSection struct {
	Title string `json:"title"`
	Help  string `json:"help,omitempty"`
	// Modes limits the section to some values of the config's "mode"
	// (empty: always shown).
	Modes  []string    `json:"modes,omitempty"`
	Fields []FormField `json:"fields"`
}

// FormField is one input. Path is a JSON path relative to the section
// (or, inside a list, to the list item): "mode", "nat.gateway", "mtu".
// An input left empty removes the member, so the config's default applies.
type FormField struct {
	Path  string `json:"path"`
	Label string `json:"label"`
	// Kind is text, number, bool, select, strings (a list of strings
	// edited as comma-separated text), numbers (the same for numbers),
	// nic (an interface picked from GET /api/nics), password (a secret:
	// Placeholder is what the API shows for a stored one, which the input
	// does not show and keeps when left empty) or list (of objects, see
	// Item).
	Kind        string   `json:"kind"`
	Options     []string `json:"options,omitempty"`     // select; "" stands for "default"
	Placeholder string   `json:"placeholder,omitempty"` // text, number, strings
	Help        string   `json:"help,omitempty"`
	// Default is what an absent bool means (false if unset).
	Default bool `json:"default,omitempty"`
	// Item describes the fields of each element of a list.
	Item []FormField `json:"item,omitempty"`
}

// RedactedSecret is what the config API shows for a stored secret (the
// PPPoE password); a config applied with it keeps the stored secret. It
// is appliance/config's RedactedSecret.
const RedactedSecret = "(unchanged)"

// DefaultConfigForm is the form for the runtime config of appliance/config
// (schema version 3, docs/config.md). The supervisor may pass another in
// Options.ConfigForm; the raw JSON editor covers everything the form does
// not.
var DefaultConfigForm = []FormSection{
	{
		Title: "Mode",
		Help:  "Bridge: a transparent learning switch of all enabled ports. NAT: a router between one WAN port and the LAN ports.",
		Fields: []FormField{
			{Path: "mode", Label: "Mode", Kind: "select", Options: []string{"bridge", "nat"}},
			{Path: "fastPath", Label: "Fast path", Kind: "select", Options: []string{"", "auto", "tcx", "xdp", "off"},
				Help: "the in-kernel fast path for established flows; default auto"},
		},
	},
	{
		Title: "Ports",
		Help:  "Data ports: a name used in rules and on the dashboard, and a kernel interface. In NAT mode exactly one port is the WAN port.",
		Fields: []FormField{
			{Path: "ports", Label: "Ports", Kind: "list", Item: []FormField{
				{Path: "name", Label: "Name", Kind: "text", Placeholder: "lan1"},
				{Path: "interface", Label: "Interface", Kind: "nic"},
				{Path: "role", Label: "Role (NAT)", Kind: "select", Options: []string{"", "lan", "wan"}},
				{Path: "addresses", Label: "Addresses (NAT)", Kind: "strings", Placeholder: "192.168.1.1/24"},
				{Path: "mtu", Label: "MTU", Kind: "number", Placeholder: "1500"},
				{Path: "vlans.native", Label: "Native VLAN", Kind: "number", Placeholder: "VLAN-unaware", Help: "untagged frames belong to it"},
				{Path: "vlans.allowed", Label: "Tagged VLANs", Kind: "numbers", Placeholder: "10, 20"},
				{Path: "enabled", Label: "Enabled", Kind: "bool", Default: true},
			}},
		},
	},
	{
		Title: "Host port",
		Help:  "The box's own addresses on the data side (kernel-owned, for the dashboard and ping).",
		Fields: []FormField{
			{Path: "hostPort.addresses", Label: "Addresses", Kind: "strings", Placeholder: "192.168.1.2/24"},
		},
	},
	{
		Title: "NAT",
		Modes: []string{"nat"},
		Fields: []FormField{
			{Path: "nat.wanDHCP", Label: "WAN address from DHCP", Kind: "bool"},
			{Path: "nat.wan.vlan.id", Label: "WAN VLAN ID", Kind: "number", Placeholder: "untagged",
				Help: "the ISP's VLAN, e.g. 7 (Deutsche Telekom); empty: untagged"},
			{Path: "nat.wan.vlan.pcp", Label: "WAN VLAN priority (data)", Kind: "number", Placeholder: "0"},
			{Path: "nat.wan.vlan.controlPCP", Label: "WAN VLAN priority (DHCP, ARP, NDP)", Kind: "number", Placeholder: "0",
				Help: "some ISPs require 6"},
			{Path: "nat.wan.dhcp.vendorClass", Label: "DHCP vendor class (option 60)", Kind: "text"},
			{Path: "nat.wan.dhcp.clientID", Label: "DHCP client identifier (option 61, hex)", Kind: "text", Placeholder: "01:52:54:00:12:34:56"},
			{Path: "nat.wan.dhcp.userClass", Label: "DHCP user classes (option 77)", Kind: "strings"},
			{Path: "nat.wan.pppoe.username", Label: "PPPoE user name", Kind: "text",
				Help: "Set to dial the ISP with PPPoE (the WAN address, gateway and DNS come from the session; turn wanDHCP off, no gateway, IPv6 off)."},
			{Path: "nat.wan.pppoe.password", Label: "PPPoE password", Kind: "password", Placeholder: RedactedSecret},
			{Path: "nat.wan.pppoe.service", Label: "PPPoE service name", Kind: "text", Placeholder: "any"},
			{Path: "nat.wan.pppoe.acName", Label: "PPPoE access concentrator", Kind: "text", Placeholder: "any"},
			{Path: "nat.wan.pppoe.mru", Label: "PPPoE MRU", Kind: "number", Placeholder: "1492", Help: "1500 asks for RFC 4638 (the WAN port then needs an MTU of 1508)."},
			{Path: "nat.gateway", Label: "Gateway", Kind: "text", Placeholder: "203.0.113.1"},
			{Path: "nat.masqueradePorts", Label: "Masquerade ports", Kind: "text", Placeholder: "1024-65535"},
			{Path: "nat.conntrack.size", Label: "Connection table size", Kind: "number", Placeholder: "65536"},
			{Path: "nat.mssClamp", Label: "Clamp the TCP MSS to the MTU", Kind: "bool", Default: true},
			{Path: "ipv6.enabled", Label: "IPv6 (prefix delegation, RAs, stateful firewall)", Kind: "bool", Default: true},
			{Path: "ipv6.prefixLength", Label: "Delegated prefix length asked for", Kind: "number", Placeholder: "56"},
			{Path: "ipv6.wanAddress", Label: "The box's WAN IPv6 address", Kind: "select", Options: []string{"", "auto", "slaac", "dhcpv6", "off"},
				Help: "auto: SLAAC where the ISP's RAs allow it and an address asked for by DHCPv6; off: link-local only"},
		},
	},
	{
		Title: "Connection timeouts",
		Help:  "Idle timeouts of tracked connections (Go durations like 30s, 2m, 120h). Empty: Linux's defaults.",
		Modes: []string{"nat"},
		Fields: []FormField{
			{Path: "nat.conntrack.timeouts.tcpEstablished", Label: "TCP established", Kind: "text", Placeholder: "120h0m0s"},
			{Path: "nat.conntrack.timeouts.tcpSynSent", Label: "TCP SYN sent", Kind: "text", Placeholder: "2m0s"},
			{Path: "nat.conntrack.timeouts.tcpSynRecv", Label: "TCP SYN received", Kind: "text", Placeholder: "1m0s"},
			{Path: "nat.conntrack.timeouts.tcpFinWait", Label: "TCP FIN wait", Kind: "text", Placeholder: "2m0s"},
			{Path: "nat.conntrack.timeouts.tcpCloseWait", Label: "TCP close wait", Kind: "text", Placeholder: "1m0s"},
			{Path: "nat.conntrack.timeouts.tcpLastAck", Label: "TCP last ACK", Kind: "text", Placeholder: "30s"},
			{Path: "nat.conntrack.timeouts.tcpTimeWait", Label: "TCP time wait", Kind: "text", Placeholder: "2m0s"},
			{Path: "nat.conntrack.timeouts.tcpClose", Label: "TCP close", Kind: "text", Placeholder: "10s"},
			{Path: "nat.conntrack.timeouts.udp", Label: "UDP, one way", Kind: "text", Placeholder: "30s"},
			{Path: "nat.conntrack.timeouts.udpStream", Label: "UDP, both ways", Kind: "text", Placeholder: "2m0s"},
			{Path: "nat.conntrack.timeouts.icmp", Label: "ICMP", Kind: "text", Placeholder: "30s"},
			{Path: "nat.conntrack.timeouts.generic", Label: "Other protocols", Kind: "text", Placeholder: "10m0s"},
		},
	},
	{
		Title: "DHCP server (LAN)",
		Help:  "Hands out addresses on the LAN with the router as gateway and DNS server.",
		Modes: []string{"nat"},
		Fields: []FormField{
			{Path: "dhcp.enabled", Label: "DHCP server on", Kind: "bool"},
			{Path: "dhcp.range", Label: "Pool", Kind: "text", Placeholder: "192.168.1.100-192.168.1.250", Help: "empty: the LAN subnet"},
			{Path: "dhcp.leaseTime", Label: "Lease time", Kind: "text", Placeholder: "12h0m0s"},
			{Path: "dhcp.probation", Label: "Time to use an address", Kind: "text", Placeholder: "1m0s",
				Help: "a device that sends nothing through the box within it may lose its lease to a new device when the pool runs short"},
			{Path: "dhcp.unprovenShare", Label: "Pool share of unused leases (%)", Kind: "number", Placeholder: "25",
				Help: "new leases not used yet hold at most this much of the pool (a starvation's)"},
			{Path: "dhcp.newDevicesPerSecond", Label: "New devices per second and port", Kind: "number", Placeholder: "50"},
			{Path: "dhcp.static", Label: "Static leases", Kind: "list", Item: []FormField{
				{Path: "mac", Label: "MAC address", Kind: "text", Placeholder: "52:54:00:12:34:56"},
				{Path: "address", Label: "Address", Kind: "text", Placeholder: "192.168.1.20"},
				{Path: "hostname", Label: "Name", Kind: "text", Placeholder: "printer"},
			}},
		},
	},
	{
		Title: "DNS server (LAN)",
		Help:  "Answers the LAN's queries from a cache, local names as <name>.<domain>.",
		Modes: []string{"nat"},
		Fields: []FormField{
			{Path: "dns.enabled", Label: "DNS server on", Kind: "bool"},
			{Path: "dns.domain", Label: "Local domain", Kind: "text", Placeholder: "lan"},
			{Path: "dns.upstreams", Label: "Upstream servers", Kind: "strings", Placeholder: "from the WAN lease", Help: "empty: the WAN lease's"},
			{Path: "dns.cacheSize", Label: "Cache size (answers)", Kind: "number", Placeholder: "10000"},
		},
	},
	{
		Title: "Time",
		Help:  "NTP servers that keep the box's clock.",
		Fields: []FormField{
			{Path: "time.servers", Label: "NTP servers", Kind: "strings", Placeholder: "0.gokrazy.pool.ntp.org"},
			{Path: "time.fromDHCP", Label: "Also the WAN lease's NTP servers", Kind: "bool", Default: true},
		},
	},
	{
		Title: "Port forwards",
		Modes: []string{"nat"},
		Fields: []FormField{
			{Path: "nat.forwards", Label: "Port forwards", Kind: "list", Item: []FormField{
				{Path: "proto", Label: "Protocol", Kind: "select", Options: []string{"tcp", "udp"}},
				{Path: "wanPorts", Label: "WAN ports", Kind: "text", Placeholder: "443 or 8000-8010"},
				{Path: "lanHost", Label: "LAN host", Kind: "text", Placeholder: "192.168.1.10"},
				{Path: "lanPort", Label: "LAN port", Kind: "number", Placeholder: "same"},
				{Path: "comment", Label: "Comment", Kind: "text"},
			}},
		},
	},
	{
		Title: "Bridge",
		Fields: []FormField{
			{Path: "bridge.fdbAging", Label: "MAC aging", Kind: "text", Placeholder: "5m0s"},
			{Path: "bridge.fdbSize", Label: "FDB size", Kind: "number", Placeholder: "8192"},
			{Path: "bridge.fdbFull", Label: "When the FDB is full", Kind: "select", Options: []string{"", "evict", "refuse"}},
			{Path: "bridge.loopProtection", Label: "Loop protection", Kind: "bool", Default: true},
			{Path: "bridge.static", Label: "Static FDB entries", Kind: "list", Item: []FormField{
				{Path: "mac", Label: "MAC address", Kind: "text", Placeholder: "02:00:00:00:00:01"},
				{Path: "port", Label: "Port", Kind: "text", Placeholder: "lan1"},
				{Path: "vlan", Label: "VLAN", Kind: "number", Placeholder: "untagged"},
			}},
		},
	},
	{
		Title: "Tuning",
		Help:  "Empty fields keep the defaults. Per-port knobs name the kernel interface.",
		Fields: []FormField{
			{Path: "tuning.placement", Label: "CPU placement", Kind: "select", Options: []string{"", "auto", "split", "same", "threaded", "manual"}},
			{Path: "tuning.copybreak", Label: "Copybreak (bytes)", Kind: "number", Placeholder: "256"},
			{Path: "tuning.ports", Label: "Per port", Kind: "list", Item: []FormField{
				{Path: "name", Label: "Interface", Kind: "nic"},
				{Path: "itr", Label: "Interrupt throttle", Kind: "text", Placeholder: "dynamic-conservative"},
				{Path: "rxRing", Label: "RX ring", Kind: "number", Placeholder: "4096"},
				{Path: "txRing", Label: "TX ring", Kind: "number", Placeholder: "4096"},
			}},
		},
	},
	{
		Title: "Dashboard",
		Fields: []FormField{
			{Path: "dashboard.listen", Label: "Listen address", Kind: "text", Placeholder: ":8080"},
			{Path: "dashboard.confirmTimeout", Label: "Confirm timeout", Kind: "text", Placeholder: "1m0s"},
			{Path: "dashboard.internetProbe", Label: "Internet probe (host pinged every 30 s)", Kind: "text", Placeholder: "1.1.1.1"},
			{Path: "dashboard.updateKey", Label: "Update signing key (ed25519, base64)", Kind: "text"},
		},
	},
}
