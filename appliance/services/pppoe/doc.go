// Package pppoe is the PPPoE client's protocol engine: discovery (RFC 2516), LCP (RFC 1661), PAP (RFC 1334), CHAP-MD5 (RFC 1994), IPCP (RFC 1332, RFC 1877) and IPv6CP (RFC 5072).
//
// It is pure Go and owns no socket: the caller (the dataplane, which owns
// the WAN port) hands it the PPPoE frames it receives (Client.Input) and
// sends the frames it gives to Link.Send. Frames are whole Ethernet frames
// without a VLAN tag; the caller adds and strips tags. The IPv4 (0x0021) and
// IPv6 (0x0057) data of the session stay in the dataplane, which frames them
// with PutSessionHeader and ParseSessionHeader.
//
// Driving it: New(link, Config{User, Password, Service, ACName, MRU, …,
// MAC}) then Run(ctx) on its own goroutine. Hand Input every received
// frame of EtherType 0x8863, and those of 0x8864 whose PPP protocol is not
// IPv4 or IPv6 (control traffic: LCP, PAP, CHAP, IPCP, IPv6CP, anything
// unknown, which the client Protocol-Rejects). Config.OnEvent (or Status)
// gives the session ID, the AC's MAC and the MTU the data path needs, and
// the IPv4 addresses, DNS servers and link-local addresses the router
// applies; cancelling Run's context sends the AC a PADT. VLAN tags and
// their priority (PCP) for the control frames are the caller's.
//
// Discovery takes the first acceptable PADO (Config.ACName and Service
// filter them), passing over ACs whose offer led nowhere before (no PADS,
// or a PADS error: skipac.go) while others answer, so that a rogue or
// broken AC answering first cannot wedge the client.
//
// One goroutine (Client.Run) runs the engine; the engine itself is
// synchronous and takes the time as an argument, so tests drive it on a
// virtual clock. The PPP negotiation automaton is RFC 1661's (fsm.go),
// shared by LCP, IPCP and IPv6CP.
//
// No third-party PPP library is used: there is no maintained Go PPP/PPPoE
// client library. The control protocols live here and the dataplane frames
// the data, rather than pppd's split over the kernel's PPPoE sockets: the
// dataplane owns the WAN port and its fast path, which must frame the
// session's packets anyway, and the development machine's kernel has no
// PPP, so only userspace framing can be tested there end to end (e1kbox's
// own kernel has CONFIG_PPPOE, unused).
package pppoe
