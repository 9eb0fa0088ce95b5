// Package config is e1kbox's runtime configuration: schema, defaults, validation, migration and atomic persistence with commit-confirm.
package config

import (
	"e1kbox/rules"
	"e1kbox/tuning"
)

// Version is the schema version this package reads and writes. Older
// versions are migrated by Parse (see migrate.go): version 3 added the
// router services (dhcp, dns, time).
const Version = 3

// Config is the runtime configuration of the box: one JSON document,
// stored as /perm/e1kbox/config.json. Parse fills in every default, so a
// parsed Config has no optional field left unset; the defaults are the
// Default* constants of the sections and are documented per field.
//
// Each section's types, defaults and validator are in one file: ports.go
// (data ports, VLANs, the host port), bridge.go, nat.go (the router's WAN
// and LAN sides, conntrack), forward.go (port forwards), ipv6.go, dhcp.go,
// dns.go, time.go, dashboard.go, rules.go and tuning.go. validate.go and
// defaults.go walk the sections; crosscheck.go holds the checks that span
// them (names, interfaces and addresses used twice, what the router
// services need of the host port).
type Config struct {
	// Version is the schema version; always Version after Parse.
	Version int `json:"version"`
	// Mode is what the box does with the data ports: bridge or nat.
	Mode Mode `json:"mode"`
	// Ports are the data ports, in the order the dashboard shows them.
	Ports []Port `json:"ports"`
	// HostPort is the TAP device the dataplane attaches to the bridge (bridge
	// mode) or the LAN (NAT mode), so that the kernel holds the box's own
	// address on the data side. nil: no host port.
	HostPort *HostPort `json:"hostPort,omitempty"`
	// Bridge configures the L2 forwarding: the bridge in bridge mode, the
	// LAN segment (the LAN ports and the host port) in NAT mode.
	Bridge Bridge `json:"bridge"`
	// NAT configures the NAT router; used in NAT mode only.
	NAT NAT `json:"nat"`
	// Rules is the packet filter in the rules package's JSON form. Port
	// names in iif/oif are Port.Name (or HostPort.Name).
	Rules rules.Ruleset `json:"rules"`
	// Tuning is the NIC and kernel knob plan. Data ports that it does not
	// list are tuned as tuning.DataPort (see TuningPlan).
	Tuning tuning.Plan `json:"tuning"`
	// Dashboard configures the web UI and API.
	Dashboard Dashboard `json:"dashboard"`
	// DHCP is the LAN's DHCPv4 server; used in NAT mode only.
	DHCP DHCPServer `json:"dhcp"`
	// DNS is the LAN's DNS forwarder and cache; used in NAT mode only.
	DNS DNSServer `json:"dns"`
	// Time keeps the box's clock (NTP).
	Time Time `json:"time"`
	// FastPath is the in-kernel fast path for established flows: auto
	// (its default hook, tcx, where the kernel runs it), tcx, xdp (generic
	// XDP: only without VLAN-tagged traffic) or off (the rings carry
	// everything). Default auto.
	FastPath FastPath `json:"fastPath"`
	// IPv6 is routed IPv6 through the NAT router; used in NAT mode only.
	IPv6 IPv6 `json:"ipv6"`
}

// Mode selects bridge or NAT operation.
type Mode string

// The modes.
const (
	// ModeBridge forwards frames between all enabled ports by MAC address
	// (a transparent, learning switch with a packet filter).
	ModeBridge Mode = "bridge"
	// ModeNAT routes between one WAN port and a LAN segment made of the LAN
	// ports, masquerading LAN hosts behind the WAN address.
	ModeNAT Mode = "nat"
)

// FastPath selects the fast path's hook, or none.
type FastPath string

// The fast path settings.
const (
	FastPathAuto FastPath = "auto"
	FastPathTCX  FastPath = "tcx"
	FastPathXDP  FastPath = "xdp"
	FastPathOff  FastPath = "off"
)
