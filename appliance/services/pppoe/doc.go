// Package pppoe is the PPPoE client's protocol engine: discovery (RFC 2516), LCP (RFC 1661), PAP (RFC 1334), CHAP-MD5 (RFC 1994), IPCP (RFC 1332, RFC 1877) and IPv6CP (RFC 5072).
//
// It is pure Go and owns no socket: the caller (the dataplane, which owns
// the WAN port) hands it the PPPoE frames it receives (Client.Input) and
// sends the frames it gives to Link.Send. Frames are whole Ethernet frames
// without a VLAN tag; the caller adds and strips tags. The IPv4 (0x0021) and
// IPv6 (0x0057) data of the session stay in the dataplane, which frames them
// with PutSessionHeader and ParseSessionHeader.
//
// One goroutine (Client.Run) runs the engine; the engine itself is
// synchronous and takes the time as an argument, so tests drive it on a
// virtual clock. The PPP negotiation automaton is RFC 1661's (fsm.go),
// shared by LCP, IPCP and IPv6CP.
//
// No third-party PPP library is used: there is no maintained Go PPP/PPPoE
// client library, and the kernel's PPP driver is not in the appliance's
// kernel, so the control protocols live here and the dataplane frames the
// data.
package pppoe
