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
// of the rate it had without the flood; a WAN client's connections to
// the forwarded port must get through too. The LAN server answers every
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
		t.Run(tc.name+" flood", func(t *testing.T) { l.natFlood(t, tc.name, tc.frame, baseRate) })
	}
	if code, body := l.boxGet("/healthz"); code != 200 {
		t.Errorf("after the floods /healthz: %d %s", code, body)
	}
}

// natFlood runs one flood of TestNATFloods and checks what the LAN and
// WAN hosts saw.
func (l *lab) natFlood(t *testing.T, name string, frame func(int) []byte, baseRate float64) {
	lan, gw := l.hosts[nsLAN-1], l.hosts[nsGW-1]
	s0 := l.stats(t)
	cpu := l.cpuMeter(t)
	smp := l.sample(time.Second)
	flood := startFlood(t, gw, "eth0", floodAim, floodAim*int(floodTime/time.Second), frame)
	time.Sleep(500 * time.Millisecond)
	stream := startIperf3(lan, "-c", natServer, "-t", "8", "-b", streamRate)
	dialed := l.paced(t, nsLAN, natServer+":8080", 100, 8*time.Second)
	inbound := l.paced(t, nsInet, natWANAddr+":8081", 20, 8*time.Second)
	time.Sleep(4 * time.Second)
	states := l.connStates(t)
	fr := flood()
	cpuPct := cpu.percent(t)
	samples := smp.end()
	s1 := l.stats(t)
	st, err := stream()
	if err != nil {
		t.Fatalf("iperf3 under the flood: %v", err)
	}
	lanRes, wanRes := dialed(), inbound()

	maxInbound, maxUnassured, maxConns := 0, 0, 0
	for _, s := range samples {
		maxInbound, maxUnassured, maxConns = max(maxInbound, s.NAT.Inbound), max(maxUnassured, s.NAT.Unassured), max(maxConns, s.NAT.Conns)
	}
	wan0, wan1 := l.port(t, s0, "wan"), l.port(t, s1, "wan")
	drop := func(r nat.Reason) uint64 { return s1.Drops[dataplane.NATDrop(r)] - s0.Drops[dataplane.NATDrop(r)] }
	rate := st.End.SumReceived.BitsPerSecond
	t.Logf("attack: name=%s_flood sent=%d took=%v rate=%.0f/s box_rx=%d box_ring_drops=%d box_cpu=%.0f%%",
		name, fr.Sent, fr.Took.Round(time.Millisecond), fr.Rate(), wan1.RxPackets-wan0.RxPackets, wan1.Ring.RxDrops-wan0.Ring.RxDrops, cpuPct)
	t.Logf("attack: name=%s_flood table max_conns=%d max_unassured=%d max_inbound=%d new=%d evicted=%d expired=%d insert_failed=%d source_limited=%d table_full_drops=%d mid_flood: %s",
		name, maxConns, maxUnassured, maxInbound, s1.NAT.NewConns-s0.NAT.NewConns, s1.NAT.Evicted-s0.NAT.Evicted,
		s1.NAT.Expired-s0.NAT.Expired, s1.NAT.InsertFailed-s0.NAT.InsertFailed, s1.NAT.SourceLimited-s0.NAT.SourceLimited,
		drop(nat.ReasonTableFull), states)
	t.Logf("attack: name=%s_flood lan_conns=%d/100 slow=%d dial_p50=%.1fms dial_max=%.1fms wan_conns=%d/20 wan_slow=%d stream_mbit=%.1f baseline_mbit=%.1f ratio=%.3f retransmits=%d",
		name, lanRes.OK, lanRes.Slow, lanRes.P50Ms, lanRes.MaxMs, wanRes.OK, wanRes.Slow, rate/1e6, baseRate/1e6, rate/baseRate, st.End.SumSent.Retransmits)

	if fr.Rate() < floodRate || fr.Took < floodTime-100*time.Millisecond {
		t.Errorf("the generator reached only %v, want at least %d/s for %v: is the machine too loaded to run this test? (send error: %v)",
			fr, floodRate, floodTime, fr.Err)
	}
	if lanRes.OK != 100 {
		t.Errorf("LAN host: %d of 100 new connections during the %s flood succeeded: %v", lanRes.OK, name, lanRes.Errors)
	}
	if wanRes.OK != 20 {
		t.Errorf("WAN client: %d of 20 connections to the port forward during the %s flood succeeded: %v", wanRes.OK, name, wanRes.Errors)
	}
	if rate < 0.9*baseRate {
		t.Errorf("iperf3 under the %s flood: %.1f Mbit/s, want at least 90%% of its %.1f Mbit/s without it", name, rate/1e6, baseRate/1e6)
	}
	// The flood must have reached the table and filled its share.
	if want := s1.NAT.MaxConns / 4 * 9 / 10; maxInbound < want {
		t.Errorf("the %s flood made at most %d unassured inbound connections, want it to reach the inbound cap (%d): did it reach the box?",
			name, maxInbound, s1.NAT.MaxConns/4)
	}
	if n := drop(nat.ReasonTableFull); n != 0 {
		t.Errorf("%d new connections dropped table_full during the %s flood", n, name)
	}
}
