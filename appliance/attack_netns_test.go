package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/nat"
)

// The attack tests of issue 18 run the appliance binary as-is in the NAT
// and bridge labs and attack it from the WAN or a bridge port with
// crafted frames (startFlood), while LAN hosts keep working. Each logs
// one line per attack in a stable key=value form ("attack: ...") with
// the generator's rate, the box's counters and CPU and what the LAN
// hosts saw.

const (
	// floodRate and floodTime are the SYN and UDP floods' (issue 18: at
	// least 20k/s for 10 s); the generator aims a little higher so that
	// the achieved rate, which the tests assert, clears the bar.
	floodRate = 20000
	floodAim  = 21000
	floodTime = 10 * time.Second
	// streamRate is the iperf3 stream's target rate during the attacks:
	// a fixed rate well under what the box forwards on this machine, so
	// that its rate under attack measures the box's treatment of it, not
	// how the two cores are shared between the generator and the box.
	streamRate = "100M"
)

// spoofedSource returns a random unicast address outside the labs' 10/8,
// loopback and multicast.
func spoofedSource(rng *rand.Rand) [4]byte {
	for {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], rng.Uint32())
		if a[0] != 0 && a[0] != 10 && a[0] != 127 && a[0] < 224 {
			return a
		}
	}
}

// synFlood returns the i-th frame of a spoofed SYN flood to the port
// forward: random source address, port and sequence number.
func synFlood(boxMAC, srcMAC [6]byte) func(i int) []byte {
	rng := rand.New(rand.NewPCG(18, 1))
	mss := []byte{2, 4, 0x05, 0xb4} // MSS 1460
	return func(int) []byte {
		ip := frametest.IPv4{Src: spoofedSource(rng), Dst: ip4(natWANAddr), ID: uint16(rng.Uint32())}
		seg := frametest.TCP{SrcPort: uint16(1024 + rng.IntN(64000)), DstPort: 8081, Seq: rng.Uint32(),
			Flags: 0x02, Window: 64240, Opts: mss}
		return frametest.Pad(frametest.Frame(boxMAC, srcMAC, frametest.EtherTypeIPv4, ip.TCPPacket(seg, nil)))
	}
}

// udpFlood returns the i-th frame of a spoofed UDP flood to the UDP port
// forward.
func udpFlood(boxMAC, srcMAC [6]byte) func(i int) []byte {
	rng := rand.New(rand.NewPCG(18, 2))
	payload := frametest.Payload(32)
	return func(int) []byte {
		ip := frametest.IPv4{Src: spoofedSource(rng), Dst: ip4(natWANAddr), ID: uint16(rng.Uint32())}
		return frametest.Pad(frametest.Frame(boxMAC, srcMAC, frametest.EtherTypeIPv4,
			ip.UDPPacket(uint16(1024+rng.IntN(64000)), 8082, payload)))
	}
}

// connStates counts the box's connections by state (and the forwarded
// ones), from /api/conntrack.
func (l *lab) connStates(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, st := range []string{"syn_sent", "syn_recv", "established", "time_wait", "close", "unreplied", "replied"} {
		fmt.Fprintf(&b, " %s=%d", st, l.conntrack(t, "state="+st+"&limit=1").Total)
	}
	fmt.Fprintf(&b, " kind_forward=%d kind_masquerade=%d", l.conntrack(t, "kind=forward&limit=1").Total, l.conntrack(t, "kind=masquerade&limit=1").Total)
	return strings.TrimSpace(b.String())
}

// TestNATFloods: a spoofed SYN flood and then a spoofed UDP flood, each
// at 20k frames/s for 10 s with random source addresses, through the port
// forwards of a box with the default table (65536) and timeouts. Meanwhile
// the LAN host opens 100 new connections to the internet, which must all
// succeed, and an iperf3 stream to the internet must keep at least 90 %
// of the rate it had without the flood; a WAN client's 20 connections to
// the forwarded port are counted. The LAN server answers every
// flood packet (SYN cookies; a UDP echo), so that every spoofed
// connection is a replied one, which the table used to keep for good.
func TestNATFloods(t *testing.T) {
	cfg := strings.Replace(natConfigJSON(65536), `, "timeouts": {"udp": "2s", "udpStream": "3s"}`, "", 1)
	l := natLab{config: cfg}.build(t)
	lan, gw := l.hosts[nsLAN-1], l.hosts[nsGW-1]
	// The spoofed sources are nowhere: the gateway drops what the LAN
	// server answers them.
	gw.IP(t, "route", "add", "blackhole", "default")
	l.serve(t, nsLAN, "lan")
	l.serve(t, nsInet, "inet")
	if _, _, out := l.helper(t, nsLAN, "udpecho", ":8082"); line(t, out, 5*time.Second) != "serving" {
		t.Fatal("udp echo did not start")
	}
	iperf3Server(t, l.hosts[nsInet-1], 5201)
	l.mustHost(t, nsLAN, "ping", "-c", "2", "-i", "0.2", "-W", "2", natServer)

	var base iperfResult
	eventually(t, 5*time.Second, "iperf3 baseline", func() (bool, string) {
		r, err := iperf3(lan, "-c", natServer, "-t", "4", "-b", streamRate)
		base = r
		return err == nil && r.End.SumReceived.Bytes > 0, fmt.Sprint(err)
	})
	baseRate := base.End.SumReceived.BitsPerSecond
	t.Logf("attack: name=baseline stream_mbit=%.1f retransmits=%d", baseRate/1e6, base.End.SumSent.Retransmits)

	boxMAC, gwMAC := macOf(t, l.box, "p2"), macOf(t, gw, "eth0")
	for _, tc := range []struct {
		name  string
		frame func(int) []byte
	}{
		{"syn", synFlood(boxMAC, gwMAC)},
		{"udp", udpFlood(boxMAC, gwMAC)},
	} {
		t.Run(tc.name+" flood", func(t *testing.T) {
			attempts(t, func() ([]string, string) { return l.natFlood(t, tc.name, tc.frame, baseRate) })
		})
	}
	if code, body := l.boxGet("/healthz"); code != 200 {
		t.Errorf("after the floods /healthz: %d %s", code, body)
	}
}

// natFloodRun is what one flood of TestNATFloods measured.
type natFloodRun struct {
	name           string
	fr             floodResult
	cpu            cpuUse
	s0, s1         dataplane.Snapshot
	boxRx          uint64 // frames the WAN port received
	ringDrops      uint64 // and its ring dropped
	samples        []dataplane.Snapshot
	states         string
	stream         iperfResult
	lanRes, wanRes pacedResult
}

// natFlood runs one flood of TestNATFloods and returns what the LAN and
// WAN hosts saw that they should not have (see attempts).
func (l *lab) natFlood(t *testing.T, name string, frame func(int) []byte, baseRate float64) ([]string, string) {
	lan, gw := l.hosts[nsLAN-1], l.hosts[nsGW-1]
	r := natFloodRun{name: name, s0: l.stats(t)}
	cpu := l.cpuMeter(t)
	smp := l.sample(t, time.Second)
	flood := startFlood(t, gw, "eth0", floodAim, floodAim*int(floodTime/time.Second), frame)
	time.Sleep(500 * time.Millisecond)
	stream := startIperf3(t, lan, "-c", natServer, "-t", "8", "-b", streamRate)
	dialed := l.paced(t, nsLAN, natServer+":8080", 100, 8*time.Second)
	inbound := l.paced(t, nsInet, natWANAddr+":8081", 20, 8*time.Second)
	time.Sleep(4 * time.Second)
	r.states = l.connStates(t)
	r.fr = flood()
	r.cpu = cpu.read(t)
	r.samples = smp.end()
	r.s1 = l.stats(t)
	var err error
	if r.stream, err = stream(); err != nil {
		t.Fatalf("iperf3 under the flood: %v", err)
	}
	r.lanRes, r.wanRes = dialed(), inbound()
	wan0, wan1 := l.port(t, r.s0, "wan"), l.port(t, r.s1, "wan")
	r.boxRx, r.ringDrops = wan1.RxPackets-wan0.RxPackets, wan1.Ring.RxDrops-wan0.Ring.RxDrops
	r.log(t, baseRate)
	return r.problems(baseRate), busy(r.fr, floodRate, r.cpu)
}

func (r *natFloodRun) drop(reason nat.Reason) uint64 {
	return r.s1.Drops[dataplane.NATDrop(reason)] - r.s0.Drops[dataplane.NATDrop(reason)]
}

func (r *natFloodRun) peaks() (conns, unassured, inbound int) {
	for _, s := range r.samples {
		conns, unassured, inbound = max(conns, s.NAT.Conns), max(unassured, s.NAT.Unassured), max(inbound, s.NAT.Inbound)
	}
	return conns, unassured, inbound
}

// log logs the run in the attack tests' key=value lines.
func (r *natFloodRun) log(t *testing.T, baseRate float64) {
	n0, n1 := r.s0.NAT, r.s1.NAT
	conns, unassured, inbound := r.peaks()
	rate := r.stream.End.SumReceived.BitsPerSecond
	t.Logf("attack: name=%s_flood sent=%d took=%v rate=%.0f/s box_rx=%d box_ring_drops=%d box_cpu=%.0f%% box_cpu_wait=%.0f%% cpu_pressure=%s",
		r.name, r.fr.Sent, r.fr.Took.Round(time.Millisecond), r.fr.Rate(), r.boxRx, r.ringDrops, r.cpu.Used, r.cpu.Waited, cpuPressure())
	t.Logf("attack: name=%s_flood table max_conns=%d max_unassured=%d max_inbound=%d new=%d evicted=%d expired=%d insert_failed=%d source_limited=%d table_full_drops=%d mid_flood: %s",
		r.name, conns, unassured, inbound, n1.NewConns-n0.NewConns, n1.Evicted-n0.Evicted, n1.Expired-n0.Expired,
		n1.InsertFailed-n0.InsertFailed, n1.SourceLimited-n0.SourceLimited, r.drop(nat.ReasonTableFull), r.states)
	t.Logf("attack: name=%s_flood lan_conns=%d/100 slow=%d dial_p50=%.1fms dial_max=%.1fms wan_conns=%d/20 wan_slow=%d stream_mbit=%.1f baseline_mbit=%.1f ratio=%.3f retransmits=%d",
		r.name, r.lanRes.OK, r.lanRes.Slow, r.lanRes.P50Ms, r.lanRes.MaxMs, r.wanRes.OK, r.wanRes.Slow, rate/1e6, baseRate/1e6, rate/baseRate, r.stream.End.SumSent.Retransmits)
}

// problems lists what the run's hosts saw that they should not have.
func (r *natFloodRun) problems(baseRate float64) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if r.fr.Rate() < floodRate || r.fr.Took < floodTime-100*time.Millisecond {
		add("the generator reached only %v, want at least %d/s for %v: is the machine too loaded to run this test? (send error: %v)",
			r.fr, floodRate, floodTime, r.fr.Err)
	}
	if r.lanRes.OK != 100 {
		add("LAN host: %d of 100 new connections during the %s flood succeeded: %v", r.lanRes.OK, r.name, r.lanRes.Errors)
	}
	// The WAN client's connections are logged, not judged: one whose
	// handshake takes longer than an unassured inbound entry lives under
	// the flood (MaxInbound/rate: 0.8 s here) dies, which a loaded
	// machine's delays bring about (a SYN proxy would be needed).
	if rate := r.stream.End.SumReceived.BitsPerSecond; rate < 0.9*baseRate {
		add("iperf3 under the %s flood: %.1f Mbit/s, want at least 90%% of its %.1f Mbit/s without it", r.name, rate/1e6, baseRate/1e6)
	}
	// The flood must have reached the table and filled its share.
	if _, _, inbound := r.peaks(); inbound < r.s1.NAT.MaxConns/4*9/10 {
		add("the %s flood made at most %d unassured inbound connections, want it to reach the inbound cap (%d): did it reach the box?",
			r.name, inbound, r.s1.NAT.MaxConns/4)
	}
	if n := r.drop(nat.ReasonTableFull); n != 0 {
		add("%d new connections dropped table_full during the %s flood", n, r.name)
	}
	return p
}
