package webui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// fakeRouter is a router behind an ISP modem with a DHCP lease.
type fakeRouter struct {
	mu  sync.Mutex
	st  RouterStatus
	off bool // bridge mode: no router
}

func newFakeRouter() *fakeRouter {
	now := time.Now()
	a := netip.MustParseAddr
	return &fakeRouter{st: RouterStatus{
		WAN: WANStatus{Port: "port1", Mode: WANModeDHCP, State: WANBound, Address: netip.MustParsePrefix("203.0.113.2/24"),
			Gateway: a("203.0.113.1"), DNS: []netip.Addr{a("203.0.113.53"), a("203.0.113.54")}, Domain: "isp.example", MTU: 1500,
			Server: a("203.0.113.1"), Obtained: now.Add(-2 * time.Hour), T1: now.Add(4 * time.Hour), T2: now.Add(8*time.Hour + 30*time.Minute),
			Expiry:   now.Add(10 * time.Hour),
			Internet: Reachability{Reachable: true, Probe: "ping 1.1.1.1", Checked: now.Add(-10 * time.Second), RTT: Duration(11300 * time.Microsecond)},
			Link:     WANLink{Interface: "eth1", VLAN: &WANVLAN{ID: 7, ControlPCP: 6}}},
		DHCP: DHCPStatus{Enabled: true, PoolStart: a("192.168.1.100"), PoolEnd: a("192.168.1.250"), LeasesInUse: 3, PoolSize: 151,
			Discovers: 40, Offers: 40, Requests: 52, Acks: 50, Naks: 2, Declines: 0, Releases: 4},
		DNS: DNSStatus{Enabled: true, Listen: []netip.AddrPort{netip.MustParseAddrPort("192.168.1.1:53")},
			Upstreams: []netip.AddrPort{netip.MustParseAddrPort("203.0.113.53:53")}, UpstreamsFrom: "wan",
			Queries: 12840, CacheHits: 9310, CacheEntries: 812, UpstreamFailures: 3,
			LatencyP50: Duration(5 * time.Millisecond), LatencyP99: Duration(50 * time.Millisecond)},
		Time: TimeStatus{Synced: true, Server: "0.gokrazy.pool.ntp.org", Offset: Duration(-1200 * time.Microsecond), LastSync: now.Add(-3 * time.Minute)},
		IPv6: fakeIPv6(now),
	}}
}

// fakeIPv6 is a /56 delegated by the ISP, its first /64 on the LAN and
// the /64 of the delegation before, deprecated.
func fakeIPv6(now time.Time) *IPv6Status {
	a, p := netip.MustParseAddr, netip.MustParsePrefix
	return &IPv6Status{DHCPv6: DHCPv6Bound, ClientState: "bound", Server: a("fe80::1"), T1: now.Add(30 * time.Minute), T2: now.Add(48 * time.Minute),
		Delegated: []IPv6Prefix{{Prefix: p("2001:db8:6600::/56"), Preferred: now.Add(time.Hour), Valid: now.Add(2 * time.Hour)}},
		LAN: []IPv6Prefix{{Prefix: p("2001:db8:6600::/64"), Preferred: now.Add(time.Hour), Valid: now.Add(2 * time.Hour)},
			{Prefix: p("2001:db8:5500::/64"), Preferred: now.Add(-time.Minute), Valid: now.Add(90 * time.Minute), Deprecated: true}},
		WANAddresses: []WANAddress{{Address: a("fe80::5054:ff:fe00:11"), Origin: WANAddrLinkLocal, State: WANAddrPreferred},
			{Address: a("2001:db8:64::100"), Origin: WANAddrDHCPv6, State: WANAddrPreferred, Preferred: now.Add(time.Hour), Valid: now.Add(2 * time.Hour)},
			{Address: a("2001:db8:64:0:1c2d:3e4f:5a6b:7c8d"), Origin: WANAddrSLAAC, State: WANAddrPreferred, Prefix: p("2001:db8:64::/64"),
				Preferred: now.Add(30 * time.Minute), Valid: now.Add(90 * time.Minute)},
			{Address: a("2001:db8:64::101"), Origin: WANAddrDHCPv6, State: WANAddrDuplicate, Valid: now.Add(2 * time.Hour)}},
		LANAddresses: []netip.Addr{a("fe80::5054:ff:fe00:12")},
		Gateway:      a("fe80::1"),
		DNS:          []netip.Addr{a("2001:db8:64::53")},
	}
}

func (f *fakeRouter) RouterStatus() (RouterStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st, !f.off
}

func (f *fakeRouter) edit(fn func(*RouterStatus)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.st)
}

// fakeDevices is the DHCP server's lease table; one static lease comes
// from the config.
type fakeDevices struct {
	mu   sync.Mutex
	devs []Device
}

func newFakeDevices() *fakeDevices {
	now := time.Now()
	a := netip.MustParseAddr
	return &fakeDevices{devs: []Device{
		{Hostname: "laptop", MAC: "52:54:00:aa:00:01", Address: a("192.168.1.101"), Expiry: now.Add(11 * time.Hour), LastSeen: now.Add(-4 * time.Second), State: DeviceBound, BytesIn: 1843200000, BytesOut: 92160000},
		{Hostname: "phone", MAC: "52:54:00:aa:00:02", Address: a("192.168.1.102"), Expiry: now.Add(9 * time.Hour), LastSeen: now.Add(-40 * time.Second), State: DeviceBound, BytesIn: 312000000, BytesOut: 21000000, Unproven: true},
		{Hostname: "printer", MAC: "52:54:00:aa:00:03", Address: a("192.168.1.20"), Expiry: now.Add(12 * time.Hour), LastSeen: now.Add(-9 * time.Minute), Static: true, InConfig: true, State: DeviceBound, BytesIn: 1200000, BytesOut: 400000},
		{Hostname: "", MAC: "52:54:00:aa:00:04", Address: a("192.168.1.103"), Expiry: now.Add(-time.Hour), LastSeen: now.Add(-13 * time.Hour), State: DeviceExpired},
	}}
}

func (f *fakeDevices) Devices() ([]Device, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Device(nil), f.devs...), true
}

func (f *fakeDevices) find(mac net.HardwareAddr) (int, error) {
	for i, d := range f.devs {
		if d.MAC == mac.String() {
			if d.InConfig {
				return i, fmt.Errorf("%v: %w", mac, ErrStaticInConfig)
			}
			return i, nil
		}
	}
	return -1, fmt.Errorf("%v: %w", mac, ErrNoLease)
}

func (f *fakeDevices) MakeStatic(mac net.HardwareAddr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, err := f.find(mac)
	if err != nil {
		return err
	}
	f.devs[i].Static = true
	return nil
}

func (f *fakeDevices) Forget(mac net.HardwareAddr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, err := f.find(mac)
	if err != nil {
		return err
	}
	f.devs = append(f.devs[:i], f.devs[i+1:]...)
	return nil
}

func (f *fakeDevices) static(mac string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.devs {
		if d.MAC == mac {
			return d.Static
		}
	}
	return false
}

// fakeDiag answers a ping from 192.0.2.1 (timeouts for 192.0.2.99), a
// two-hop route and lookups of *.example; the capture writes a file made
// of req's fields, so a test can tell the filter arrived.
type fakeDiag struct {
	mu      sync.Mutex
	reqs    []CaptureRequest
	reboots int
}

func (f *fakeDiag) Sources() []DiagSource {
	return []DiagSource{{ID: "", Label: "the box's routing table"}, {ID: "e1khost0", Label: "host port e1khost0"}}
}

func (f *fakeDiag) Ping(ctx context.Context, req PingRequest, reply func(PingReply)) (PingSummary, error) {
	if req.Host == "" || strings.Contains(req.Host, " ") {
		return PingSummary{}, errors.New("no host given")
	}
	n := req.Count
	if n == 0 {
		n = 4
	}
	target := netip.MustParseAddr("192.0.2.1")
	sum := PingSummary{Target: target, Sent: n}
	for i := 1; i <= n; i++ {
		select {
		case <-ctx.Done():
			return sum, nil
		case <-time.After(50 * time.Millisecond):
		}
		if req.Host == "192.0.2.99" {
			reply(PingReply{Seq: i, Error: "timeout"})
			continue
		}
		rtt := Duration(time.Duration(10+i) * time.Millisecond)
		reply(PingReply{Seq: i, From: target, Bytes: 64, TTL: 57, RTT: rtt})
		sum.Received++
		sum.Min, sum.Max, sum.Avg = Duration(11*time.Millisecond), rtt, Duration(12*time.Millisecond)
	}
	return sum, nil
}

func (f *fakeDiag) Traceroute(ctx context.Context, req TraceRequest, hop func(TraceHop)) error {
	hop(TraceHop{TTL: 1, Addr: netip.MustParseAddr("192.168.1.1"), RTTs: []Duration{Duration(time.Millisecond), Duration(time.Millisecond), -1}})
	hop(TraceHop{TTL: 2, RTTs: []Duration{-1, -1, -1}})
	hop(TraceHop{TTL: 3, Addr: netip.MustParseAddr("192.0.2.1"), Reached: true, RTTs: []Duration{Duration(12 * time.Millisecond), Duration(13 * time.Millisecond), Duration(12 * time.Millisecond)}})
	return nil
}

func (f *fakeDiag) Lookup(ctx context.Context, req LookupRequest) (LookupResult, error) {
	if !strings.HasSuffix(req.Name, ".example") {
		return LookupResult{}, fmt.Errorf("name %q is not a domain name", req.Name)
	}
	return LookupResult{Server: "192.168.1.1:53", RCode: "NOERROR", RTT: Duration(3 * time.Millisecond),
		Answer: []string{req.Name + ".\t300\tIN\tA\t192.0.2.7"}}, nil
}

func (f *fakeDiag) Capture(ctx context.Context, req CaptureRequest, w io.Writer) (CaptureResult, error) {
	if req.Interface == "" {
		return CaptureResult{}, errors.New("no interface")
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	b := fmt.Sprintf("PCAPNG iface=%s proto=%s host=%v l4=%d count=%d", req.Interface, req.Proto, req.Host, req.L4, req.MaxPackets)
	n, err := w.Write([]byte(b))
	return CaptureResult{Packets: req.MaxPackets, Bytes: int64(n), Ended: "count"}, err
}

func (f *fakeDiag) Reboot() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reboots++
	return nil
}

func (f *fakeDiag) rebooted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reboots
}

type fakeNICs []NIC

func (f fakeNICs) NICs() []NIC { return f }

var testNICs = fakeNICs{
	{Name: "eth0", Driver: "e1000e", MAC: "52:54:00:00:00:10", Up: true, SpeedMbps: 1000, Use: "management"},
	{Name: "eth1", Driver: "e1000e", MAC: "52:54:00:00:00:11", Up: true, SpeedMbps: 1000, Use: "data", Port: "port1"},
	{Name: "eth2", Driver: "e1000e", MAC: "52:54:00:00:00:12", Up: true, SpeedMbps: 1000, Use: "data", Port: "port2"},
	{Name: "eth3", Driver: "e1000e", MAC: "52:54:00:00:00:13", Use: "data", Port: "port3"},
	{Name: "eth7", Driver: "igb", MAC: "52:54:00:00:00:17", Up: true, SpeedMbps: 1000},
	{Name: "e1khost0", Driver: "tun", MAC: "02:e1:00:00:00:01", Up: true, Use: "host", Port: "host"},
}
