package dataplane

import (
	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/frame"
)

// replyTTL is the TTL (hop limit) of the answers the bridge generates.
const replyTTL = 64

// buildReject writes into dst the answer a "reject" rule gives to the
// frame b (parsed into f) and returns its length, or 0 when the frame must
// not be answered. TCP gets a RST, everything else over IP an ICMP (or
// ICMPv6) port unreachable, as nftables' reject does; port mtu limits the
// quote. The answer impersonates the destination: its source MAC and IP are
// the frame's destination ones, and it carries the frame's VLAN tags in the
// bytes (it leaves through the ingress port, where they were). Never
// answered: non-IP frames, group or broadcast destinations, sources or
// destinations that are not a unicast host, later fragments, TCP RSTs and
// ICMP errors (frame.IsICMPError). It does not allocate.
func buildReject(dst, b []byte, f *frame.Frame, mtu int) int {
	if bridge.IsGroup(&f.Dst) || f.LaterFragment || !unicastPair(f) {
		return 0
	}
	a := frame.Answer{
		MAC: f.Dst, Tags: f.Tags[:f.NTags], Src4: f.IPv4.Dst, Src6: f.IPv6.Dst,
		DF: true, TTL: replyTTL, MTU: mtu,
	}
	switch {
	case f.Proto == frame.ProtoTCP:
		return frame.PutRST(dst, f, &a)
	case f.IsIPv4():
		return frame.PutICMPError(dst, b, f, &a, frame.ICMPDestUnreach, 3, 0) // port unreachable
	default:
		return frame.PutICMPError(dst, b, f, &a, frame.ICMPv6DestUnreach, 4, 0) // port unreachable
	}
}

// unicastPair reports whether f is IP between two unicast hosts.
func unicastPair(f *frame.Frame) bool {
	switch {
	case f.IsIPv4():
		return frame.IsUnicastIPv4(f.IPv4.Src) && frame.IsUnicastIPv4(f.IPv4.Dst)
	case f.IsIPv6():
		return frame.IsUnicastIPv6(&f.IPv6.Src) && frame.IsUnicastIPv6(&f.IPv6.Dst)
	}
	return false
}
