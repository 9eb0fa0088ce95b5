// Package dhcpclient is the machinery under the WAN DHCP clients (wanclient, dhcp6c): the run loop over a packet socket, Ethernet/IP/UDP framing, retransmission timing, lease files, stats and the clock.
//
// A client keeps only its protocol: its messages, options and state
// machine. Core runs that machine on one goroutine (Run): it opens the
// transport (OpenIPv4, OpenIPv6: a wantap socket, on the WAN's VLAN if
// it has one: tagged frames out, that VLAN's replies in), reads frames in the
// background, decodes them with the client's decoder (DecodeIPv4 or
// DecodeIPv6 under it) and hands them to Machine.Handle; a timer on
// Machine.WakeAt calls Machine.Tick. Frames it cannot use are counted by
// reason in Stats.Ignored. Core also holds what other goroutines read
// while Run runs: the lease in use (Current) and the Stats.
//
// The retransmission schedules are the protocols' own: Backoff and Jitter
// for DHCPv4 (RFC 2131 section 4.1), Retrans for DHCPv6 (RFC 8415 section
// 15); the clients keep their parameters. Lease files are written
// atomically (SaveFile).
package dhcpclient
