package nat

import (
	"math/rand/v2"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
)

var spoofMAC = mac(0x66)

// gratuitous is a gratuitous ARP (op 2, or 1) from mac claiming ip.
func gratuitous(op uint16, m [6]byte, ip [4]byte, dst [6]byte) []byte {
	return frametest.ARPFrame(dst, m, op, m, ip, [6]byte{}, ip)
}

// TestARPSpoofGateway: a host on the WAN segment that claims the
// gateway's address (gratuitous ARP, unsolicited replies, requests with
// the gateway as sender) cannot divert its traffic while the gateway
// answers the router's probes; each claim is counted and makes the
// router probe the gateway.
func TestARPSpoofGateway(t *testing.T) {
	e := newEnv(t, nil)
	out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil))
	probes := 0
	for i := range 200 {
		var b []byte
		switch i % 3 {
		case 0:
			b = gratuitous(2, spoofMAC, a4(gwAddr), bcast)
		case 1:
			b = frametest.ARPFrame(wanMAC, spoofMAC, 2, spoofMAC, a4(gwAddr), wanMAC, a4(wanAddr)) // unsolicited reply
		case 2:
			b = frametest.ARPFrame(bcast, spoofMAC, 1, spoofMAC, a4(gwAddr), [6]byte{}, a4(wanAddr))
		}
		e.send(WAN, b)
		for _, o := range drain(e.wan) {
			// The router probes the gateway's MAC; the gateway answers.
			if string(o.b[0:6]) == string(gwMAC[:]) {
				probes++
				e.send(WAN, frametest.ARPFrame(wanMAC, gwMAC, 2, gwMAC, a4(gwAddr), wanMAC, a4(wanAddr)))
			}
		}
		_, f := e.forward(LAN, out, wanPort)
		if f.Dst != gwMAC {
			t.Fatalf("after %d spoofed ARPs the router sends to %v, want the gateway %v", i+1, f.Dst, gwMAC)
		}
		e.now += sec / 10
	}
	if probes == 0 || probes > 25 {
		t.Errorf("%d probes of the gateway for 200 claims over 20 s, want some, at most one a second", probes)
	}
	if d := e.r.Stats().Drops[ReasonARPConflict]; d < 100 {
		t.Errorf("%d ARP conflicts counted, want the claims", d)
	}
}

// TestARPNeighbourReplaced: a neighbour that stopped answering is
// replaced by the MAC that now claims its address, once the probes went
// unanswered.
func TestARPNeighbourReplaced(t *testing.T) {
	e := newEnv(t, nil)
	out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil))
	newGW := mac(0x77)
	var f frame.Frame
	for range 10 {
		e.send(WAN, gratuitous(2, newGW, a4(gwAddr), bcast))
		drain(e.wan) // probes of the old gateway, unanswered
		e.now += sec
		_, f = e.forward(LAN, out, wanPort)
	}
	if f.Dst != newGW {
		t.Errorf("after 10 s of unanswered probes the router sends to %v, want the new gateway %v", f.Dst, newGW)
	}
}

// TestARPSprayKeepsNeighbours: a flood of ARP requests from every address
// of both subnets cannot evict the gateway or the LAN hosts the router
// sends to.
func TestARPSprayKeepsNeighbours(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxNeighbours = 16 })
	rng := rand.New(rand.NewPCG(5, 6))
	toA := fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(2, 1, nil))
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil)), wanPort)
	e.forward(WAN, toA, lanPort)
	e.now += sec // the spray's entries are newer than host A's
	for i := range 10000 {
		lan := i%2 == 0
		m := mac(byte(rng.IntN(200)))
		m[4] = byte(i)
		if lan {
			ip := [4]byte{192, 168, 1, byte(30 + rng.IntN(200))}
			e.send(LAN, frametest.ARPFrame(bcast, m, 1, m, ip, [6]byte{}, a4(lanAddr)))
		} else {
			ip := [4]byte{203, 0, 113, byte(3 + rng.IntN(250))}
			e.send(WAN, frametest.ARPFrame(bcast, m, 1, m, ip, [6]byte{}, a4(wanAddr)))
		}
		if i%100 == 0 {
			e.now += sec / 10
			// Host A's connection keeps sending both ways.
			e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil)), wanPort)
			e.forward(WAN, toA, lanPort)
		}
	}
	if n, ok := e.r.neigh.get(WAN, ip4(gwAddr)); !ok || !n.resolved || n.mac != gwMAC {
		t.Errorf("the gateway's entry after the spray: %+v %v", n, ok)
	}
	if n, ok := e.r.neigh.get(LAN, ip4(ipA)); !ok || !n.resolved || n.mac != hostA {
		t.Errorf("host A's entry after the spray: %+v %v", n, ok)
	}
}

// TestARPSpoofSlowGateway: the gateway answers the router's probes, but
// 2.5 s late (a busy gateway). A claim that keeps coming every 100 ms is
// not taken at the moment the third probe goes out: the last probe gets
// its second to be answered, as for a stale entry, and the late answers
// keep confirming the gateway.
func TestARPSpoofSlowGateway(t *testing.T) {
	e := newEnv(t, nil)
	out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil))
	var due []int64 // when the gateway's answers to probes arrive
	for i := range 100 {
		e.send(WAN, gratuitous(2, spoofMAC, a4(gwAddr), bcast))
		for _, o := range drain(e.wan) {
			if string(o.b[0:6]) == string(gwMAC[:]) {
				due = append(due, e.now+25*sec/10)
			}
		}
		for len(due) > 0 && due[0] <= e.now {
			e.send(WAN, frametest.ARPFrame(wanMAC, gwMAC, 2, gwMAC, a4(gwAddr), wanMAC, a4(wanAddr)))
			due = due[1:]
		}
		if _, f := e.forward(LAN, out, wanPort); f.Dst != gwMAC {
			t.Fatalf("after %.1f s of claims with the gateway answering 2.5 s late, the router sends to %v, want the gateway %v",
				float64(i)/10, f.Dst, gwMAC)
		}
		e.now += sec / 10
	}
}
