// Package wanclient is the router's WAN DHCPv4 client: it leases the WAN address over a packet socket of its own, with no kernel address on the interface.
//
// The WAN port belongs to the userspace dataplane and the kernel holds no
// IPv4 address on it, so the client cannot use a UDP socket. It opens an
// AF_PACKET socket on the WAN interface with a BPF filter that passes only
// IPv4/UDP frames to port 68, and builds the Ethernet, IPv4 and UDP headers
// around each DHCP message itself (github.com/insomniacslk/dhcp/dhcpv4
// encodes and decodes the messages). AF_PACKET taps run before the
// dataplane's tcx ingress drop, so the socket sees the server's replies
// although the kernel never does. The socket, the framing, the run loop,
// the lease file and the stats are the machinery it shares with dhcp6c
// (package dhcpclient); this package holds the protocol.
//
// Client.Run is the RFC 2131 state machine:
//
//	INIT-REBOOT  the lease file holds an unexpired lease: broadcast REQUEST
//	             for it (4, 8 s); ACK keeps it, NAK or silence → INIT
//	INIT         → SELECTING: broadcast DISCOVER, retransmitted after
//	             4, 8, 16, 32, 64, 64, … s, each ±1 s of jitter
//	REQUESTING   broadcast REQUEST for the first OFFER (4, 8, 16 s), ACK →
//	             BOUND, NAK or silence → INIT
//	BOUND        until T1
//	RENEWING     from T1: REQUEST unicast to the server (IP destination the
//	             server identifier, Ethernet destination the MAC the last ACK
//	             came from), retransmitted after half the time left to T2,
//	             at least 60 s
//	REBINDING    from T2: broadcast REQUEST, retransmitted after half the
//	             time left to expiry, at least 60 s
//	expiry       → INIT, onChange(old, nil)
//
// Consecutive NAKs delay the next DISCOVER by the same backoff (the first
// NAK by nothing). Every change of the lease's address, gateway, DNS, NTP
// servers, MTU or domain calls onChange; a renewal with the same values
// does not. Each ACK is written to Config.LeaseFile atomically. Release
// sends a DHCPRELEASE and stops Run. Frames that are malformed or not for
// this client are dropped and counted in Stats by reason.
//
// The client does not ARP-probe an offered address (no DHCPDECLINE) and
// does not answer ARP for its address: the dataplane's router owns the WAN
// address once onChange has configured it.
package wanclient
