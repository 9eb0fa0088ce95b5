// Package wantap is the WAN clients' packet socket: an AF_PACKET socket on the WAN interface, bound to IPv4 or IPv6 behind tcx ingress and filtered to the replies a client waits for; on the WAN's 802.1Q VLAN, it tags what it sends and receives only that VLAN's replies (VLAN).
package wantap
