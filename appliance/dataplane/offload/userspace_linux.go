package offload

import (
	"fmt"
	"net/netip"
	"time"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/fastpath"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/dataplane/routing"
)

// measureUserspace measures, in this process, what the slow path's
// forwarding costs the self-test's NAT and bridge frames
// (fastpath.Sample): the work of a worker on a frame, without the rings
// and syscalls, so a lower bound of what the rings cost it (the AF_PACKET
// copy into the ring, the wake-up, the send and its skb are not in it).
func measureUserspace() []fastpath.PathCost {
	s := fastpath.SampleTraffic()
	return []fastpath.PathCost{
		userPath(fastpath.PathNAT, func() (func() error, error) { return natForwarder(&s) }),
		userPath(fastpath.PathBridge, func() (func() error, error) { return bridgeForwarder(&s) }),
	}
}

// userPath times the forwarder setup returns, one frame per call, in
// rounds of fastpath.SelfTestFrames frames (fastpath.PerFrame).
func userPath(path string, setup func() (func() error, error)) fastpath.PathCost {
	failed := func(err error) fastpath.PathCost {
		return fastpath.PathCost{Path: path, Error: fmt.Sprintf("userspace: %v", err)}
	}
	fwd, err := setup()
	if err != nil {
		return failed(err)
	}
	ns, err := fastpath.PerFrame(func(int) (time.Duration, error) {
		start := time.Now()
		for range fastpath.SelfTestFrames {
			if err := fwd(); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	})
	if err != nil {
		return failed(err)
	}
	return fastpath.PathCost{Path: path, NsPerFrame: ns}
}

// The sample's ports as the private router and FDB number them.
const (
	sampleLAN = 1
	sampleWAN = 2
)

// natForwarder is a private NAT router (package nat) of the sample's
// addresses with the sample's connection established, and what a
// worker does with each of its frames: the router's Handle (parse,
// conntrack lookup, translation with incremental checksums, the next
// hop's MAC), then the copy into a transmit buffer. Each frame is first
// restored from its template (the router translates in place): 60 bytes
// more copied than a worker copies.
func natForwarder(s *fastpath.Sample) (func() error, error) {
	prefix := func(a [4]byte) netip.Prefix { return netip.PrefixFrom(netip.AddrFrom4(a), s.Bits) }
	r, err := nat.New(nat.Config{
		LAN:      nat.Port{ID: sampleLAN, MAC: s.RouterLAN[:], Addr: prefix(s.LANAddr)},
		WAN:      nat.Port{ID: sampleWAN, MAC: s.RouterWAN[:], Addr: prefix(s.WANAddr)},
		Gateway:  netip.AddrFrom4(s.GatewayAddr),
		MaxConns: 64, MaxNeighbours: 16,
	})
	if err != nil {
		return nil, fmt.Errorf("a router for the sample: %w", err)
	}
	w := r.NewWorker(nil)
	now := time.Now().UnixNano()
	// The router learns the host and the gateway from their ARP requests
	// for its addresses.
	for _, n := range []struct {
		port     int
		mac      [6]byte
		ip, mine [4]byte
	}{{sampleLAN, s.Host, s.HostAddr, s.LANAddr}, {sampleWAN, s.Gateway, s.GatewayAddr, s.WANAddr}} {
		b := make([]byte, frame.MinFrameLen)
		frame.PutARP(b, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, n.mac, &frame.ARP{Op: 1, SenderMAC: n.mac, SenderIP: n.ip, TargetIP: n.mine})
		if res := w.Handle(now, n.port, b); res.Action != routing.Reply {
			return nil, fmt.Errorf("the router did not answer an ARP request: %v (%v)", res.Action, res.Reason)
		}
	}
	// The host's first datagram opens the connection; the server's
	// answer establishes it.
	first := w.Handle(now, sampleLAN, s.NATFrame())
	var f frame.Frame
	if err := natForwarded(first, sampleWAN); err != nil {
		return nil, fmt.Errorf("the connection's first datagram: %w", err)
	}
	if err := frame.Parse(first.Frame, &f); err != nil {
		return nil, fmt.Errorf("the connection's first datagram: %w", err)
	}
	if err := natForwarded(w.Handle(now, sampleWAN, s.ReplyFrame(f.UDP.SrcPort)), sampleLAN); err != nil {
		return nil, fmt.Errorf("the server's answer: %w", err)
	}
	tmpl := s.NATFrame()
	buf, tx := make([]byte, len(tmpl)), make([]byte, 2048)
	return func() error {
		copy(buf, tmpl)
		res := w.Handle(now, sampleLAN, buf)
		if err := natForwarded(res, sampleWAN); err != nil {
			return fmt.Errorf("the sample's NAT frame: %w", err)
		}
		copy(tx, res.Frame)
		return nil
	}, nil
}

// natForwarded checks that the router forwarded a frame to port.
func natForwarded(res nat.Result, port int) error {
	if res.Action != routing.Forward || res.Port != port {
		return fmt.Errorf("the router's verdict: %v on port %d (%v), want forward on port %d", res.Action, res.Port, res.Reason, port)
	}
	return nil
}

// bridgeForwarder is a private FDB (package bridge) that knows the
// sample's peer, and what a worker does with each frame of the pair:
// parse, learn the source, look the destination up, copy into a transmit
// buffer. The rules' lookup is left out (the fast path's pair needs none).
func bridgeForwarder(s *fastpath.Sample) (func() error, error) {
	fdb, err := bridge.New(bridge.Options{Capacity: 64})
	if err != nil {
		return nil, fmt.Errorf("an FDB for the sample: %w", err)
	}
	if r := fdb.Learn(&s.Peer, 0, sampleWAN, 0); r != bridge.Learned {
		return nil, fmt.Errorf("the FDB did not learn the sample's peer (%d)", r)
	}
	b, tx := s.PairFrame(), make([]byte, 2048)
	var f frame.Frame
	return func() error {
		if err := frame.Parse(b, &f); err != nil {
			return fmt.Errorf("the sample's bridged frame: %w", err)
		}
		fdb.Learn(&f.Src, 0, sampleLAN, 0)
		if out, ok := fdb.Lookup(&f.Dst, 0, 0); !ok || out != sampleWAN {
			return fmt.Errorf("the FDB's port for the sample's peer: %d (known: %v), want %d", out, ok, sampleWAN)
		}
		copy(tx, b)
		return nil
	}, nil
}
