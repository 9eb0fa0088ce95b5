package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/webui"
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
	smp := l.sample(time.Second)
	flood := startFlood(t, gw, "eth0", floodAim, floodAim*int(floodTime/time.Second), frame)
	time.Sleep(500 * time.Millisecond)
	stream := startIperf3(lan, "-c", natServer, "-t", "8", "-b", streamRate)
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

// tcpAck matches an IPv4 TCP segment from src to dst and returns its
// source port and acknowledgment number.
func tcpAck(p []byte, src, dst [4]byte) (sport uint16, ack uint32, ok bool) {
	if len(p) < 14+20+20 || binary.BigEndian.Uint16(p[12:]) != 0x0800 || p[14+9] != 6 ||
		[4]byte(p[14+12:]) != src || [4]byte(p[14+16:]) != dst {
		return 0, 0, false
	}
	l4 := p[14+int(p[14]&0xf)*4:]
	if len(l4) < 20 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(l4), binary.BigEndian.Uint32(l4[8:]), true
}

// TestNATBlindRST: a live connection from the LAN host to the internet
// server's echo port survives 200 spoofed RSTs from the WAN with
// sequence numbers outside the client's window (dropped by the box: none
// reaches the LAN); a RST inside the window but not at RCV.NXT is passed
// on, and the client's challenge ACK keeps the connection; a RST at
// RCV.NXT ends it, in the box and at the client (RFC 5961, as Linux
// does). The attacker sits on the WAN side; the client's RCV.NXT is read
// off its ACKs as they leave the box.
func TestNATBlindRST(t *testing.T) {
	c := newRSTConn(t, newNATLab(t, 4096))
	l := c.l
	port, next := c.rcvNxt(t)
	s0 := l.stats(t)
	rng := rand.New(rand.NewPCG(18, 3))
	var blind [][]byte
	for range 200 {
		// At least 2^30 past RCV.NXT (more than any window) or behind it.
		blind = append(blind, c.rst(port, next+1<<30+rng.Uint32N(3<<30)))
	}
	n := c.rstsAtLAN(t, blind...)
	dropped := l.stats(t).Drops[dataplane.NATDrop(nat.ReasonRST)] - s0.Drops[dataplane.NATDrop(nat.ReasonRST)]
	st := c.state(t)
	t.Logf("attack: name=blind_rst sent=200 dropped_rst_out_of_window=%d reached_lan=%d state_after=%s", dropped, n, st)
	if n != 0 || dropped != 200 {
		t.Errorf("200 out-of-window RSTs: %d reached the LAN host, the box dropped %d as rst_out_of_window; want 0 and 200", n, dropped)
	}
	if st != "established" {
		t.Errorf("after 200 out-of-window RSTs the box has the connection %s, want established", st)
	}
	if s := c.echo(t); s != "ok" {
		t.Fatalf("the connection after 200 out-of-window RSTs: %s", s)
	}

	port, next = c.rcvNxt(t)
	n = c.rstsAtLAN(t, c.rst(port, next+1000))
	st = c.state(t)
	echoed := c.echo(t)
	t.Logf("attack: name=in_window_rst reached_lan=%d state_after=%s echo=%s", n, st, echoed)
	if n != 1 || st != "established" || echoed != "ok" {
		t.Errorf("a RST in the window, 1000 past RCV.NXT: %d reached the LAN host (want 1: the client answers it), the box has the connection %s (want established), echo %s (want ok)", n, st, echoed)
	}

	port, next = c.rcvNxt(t)
	n = c.rstsAtLAN(t, c.rst(port, next))
	st = c.state(t)
	echoed = c.echo(t)
	t.Logf("attack: name=exact_rst reached_lan=%d state_after=%s echo=%s", n, st, echoed)
	if n != 1 || (st != "close" && st != "gone") || !strings.Contains(echoed, "reset") {
		t.Errorf("a RST at RCV.NXT: %d reached the LAN host (want 1), the box has the connection %s (want close), echo %q (want a reset)", n, st, echoed)
	}
}

// rstConn is TestNATBlindRST's connection: the LAN host's echo
// connection to the internet server (helperConn) and the MACs a spoofer
// on the WAN puts on its RSTs.
type rstConn struct {
	l             *lab
	in            io.Writer
	out           *bufio.Reader
	boxMAC, gwMAC [6]byte
}

func newRSTConn(t *testing.T, l *lab) *rstConn {
	l.serve(t, nsInet, "inet")
	_, in, out := l.helper(t, nsLAN, "conn", natServer+":7")
	if s := line(t, out, 10*time.Second); !strings.HasPrefix(s, "local ") {
		t.Fatalf("conn helper: %q", s)
	}
	return &rstConn{l: l, in: in, out: out, boxMAC: macOf(t, l.box, "p2"), gwMAC: macOf(t, l.hosts[nsGW-1], "eth0")}
}

// echo echoes a line over the connection: "ok" or the client's error.
func (c *rstConn) echo(t *testing.T) string {
	fmt.Fprintln(c.in, "echo")
	return line(t, c.out, 10*time.Second)
}

// state is the box's state of the connection ("gone" when it has none).
func (c *rstConn) state(t *testing.T) string {
	p := c.l.conntrack(t, "proto=tcp&port=7&addr="+natServer)
	if p.Total == 0 {
		return "gone"
	}
	return p.Conns[0].State
}

// rcvNxt echoes once and returns the client's NAT port and RCV.NXT: the
// highest acknowledgment it sent (its ACK of the echo), as seen on the
// WAN.
func (c *rstConn) rcvNxt(t *testing.T) (uint16, uint32) {
	t.Helper()
	gwCap := c.l.capture(t, nsGW)
	if s := c.echo(t); s != "ok" {
		t.Fatalf("echo: %s", s)
	}
	var port uint16
	var next uint32
	gwCap(500*time.Millisecond, func(p afpacket.Packet) bool {
		sp, ack, ok := tcpAck(p.Data, ip4(natWANAddr), ip4(natServer))
		if ok && (port == 0 || int32(ack-next) > 0) {
			port, next = sp, ack
		}
		return ok
	})
	if port == 0 {
		t.Fatal("no segment of the connection seen on the WAN")
	}
	return port, next
}

// rst is a RST from the server to the client's NAT port with seq.
func (c *rstConn) rst(port uint16, seq uint32) []byte {
	seg := frametest.TCP{SrcPort: 7, DstPort: port, Seq: seq, Flags: 0x04}
	return frametest.Pad(frametest.Frame(c.boxMAC, c.gwMAC, frametest.EtherTypeIPv4,
		frametest.IPv4{Src: ip4(natServer), Dst: ip4(natWANAddr)}.TCPPacket(seg, nil)))
}

// rstsAtLAN sends frames from the gateway and counts the RSTs from the
// server that reach the LAN host.
func (c *rstConn) rstsAtLAN(t *testing.T, frames ...[]byte) int {
	lanCap := c.l.capture(t, nsLAN)
	c.l.send(t, nsGW, frames...)
	return lanCap(500*time.Millisecond, isRSTFrom(net.ParseIP(natServer)))
}

// neighbour returns the box's ARP entry for ip, if any.
func (l *lab) neighbour(t *testing.T, ip string) (webui.Neighbour, bool) {
	t.Helper()
	code, body := l.boxGet("/api/neighbours")
	var r struct{ Neighbours []webui.Neighbour }
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil {
		t.Fatalf("/api/neighbours: %d %s", code, body)
	}
	for _, n := range r.Neighbours {
		if n.IP.String() == ip {
			return n, true
		}
	}
	return webui.Neighbour{}, false
}

// arpAttack returns one round of an ARP spoofing host's frames: claims
// that the gateway's address is at mac (unsolicited replies to the box,
// gratuitous replies and requests, requests to the box with the gateway
// as sender), 80 in all, and a spray of requests to the box from every
// other address of the WAN subnet with random MACs.
func arpAttack(rng *rand.Rand, mac, boxMAC [6]byte) (frames [][]byte, claims int) {
	gw, box, none := ip4(natGateway), ip4(natWANAddr), [6]byte{}
	for range 20 {
		frames = append(frames,
			frametest.ARPFrame(boxMAC, mac, 2, mac, gw, boxMAC, box),
			frametest.ARPFrame(bcast, mac, 2, mac, gw, bcast, gw),
			frametest.ARPFrame(bcast, mac, 1, mac, gw, none, gw),
			frametest.ARPFrame(bcast, mac, 1, mac, gw, none, box))
	}
	claims = len(frames)
	for host := byte(3); host < 255; host++ {
		if host == ip4(natAttacker)[3] {
			continue
		}
		m := [6]byte{0x02, 0x66, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), host}
		frames = append(frames, frametest.ARPFrame(bcast, m, 1, m, [4]byte{10, 61, 0, host}, none, box))
	}
	return frames, claims
}

// TestNATARPSpoof: a host on the WAN segment (a Linux bridge joining the
// box, the gateway and the attacker) claims the gateway's address for
// its own MAC in every way ARP allows and sprays requests from the rest
// of the subnet, for 4 s, while the LAN host pings the internet server
// every 10 ms and opens 10 connections to it. Nothing meant for the
// gateway may reach the attacker, the traffic keeps going through the
// real gateway and the box keeps the gateway's MAC.
func TestNATARPSpoof(t *testing.T) {
	l := natLab{config: natConfigJSON(4096), wanSegment: true}.build(t)
	l.serve(t, nsInet, "inet")
	l.mustHost(t, nsLAN, "ping", "-c", "2", "-i", "0.2", "-W", "2", natServer)
	gwMAC, atkMAC, boxMAC := macOf(t, l.hosts[nsGW-1], "eth0"), macOf(t, l.hosts[nsAtk-1], "eth0"), macOf(t, l.box, "p2")
	if n, ok := l.neighbour(t, natGateway); !ok || n.MAC != net.HardwareAddr(gwMAC[:]).String() {
		t.Fatalf("before the attack the gateway's entry is %+v (%v), want %v", n, ok, net.HardwareAddr(gwMAC[:]))
	}

	atkCap := l.capture(t, nsAtk)
	diverted, toAttacker := 0, 0
	var divertedSample []string
	captured := make(chan struct{})
	go func() {
		defer close(captured)
		atkCap(6*time.Second, func(p afpacket.Packet) bool {
			// Unicast IPv4 only: multicast (the hosts' IGMP reports)
			// goes to every port of the segment.
			if len(p.Data) < 34 || p.Data[0]&1 != 0 || binary.BigEndian.Uint16(p.Data[12:]) != 0x0800 {
				return false
			}
			if [4]byte(p.Data[30:34]) != ip4(natAttacker) {
				diverted++ // an IPv4 packet for someone else
				if len(divertedSample) < 3 {
					divertedSample = append(divertedSample, fmt.Sprintf("%v→%v %v→%v proto %d",
						net.HardwareAddr(p.Data[6:12]), net.HardwareAddr(p.Data[0:6]), net.IP(p.Data[26:30]), net.IP(p.Data[30:34]), p.Data[23]))
				}
			} else {
				toAttacker++
			}
			return true
		})
	}()
	s0 := l.stats(t)
	gwRx := l.rxPackets(t, nsGW)
	type pingResult struct {
		out string
		err error
	}
	pinged := make(chan pingResult, 1)
	go func() {
		out, err := l.host(nsLAN, "ping", "-q", "-c", "500", "-i", "0.01", "-W", "2", natServer)
		pinged <- pingResult{out, err}
	}()
	dialed := l.paced(t, nsLAN, natServer+":8080", 10, 4*time.Second)
	rng := rand.New(rand.NewPCG(18, 6))
	claims := 0
	for range 10 {
		frames, n := arpAttack(rng, atkMAC, boxMAC)
		l.send(t, nsAtk, frames...)
		claims += n
		time.Sleep(400 * time.Millisecond)
	}
	conns := dialed()
	pr := <-pinged
	<-captured
	s1 := l.stats(t)
	gwGot := l.rxPackets(t, nsGW) - gwRx
	conflicts := s1.Drops[dataplane.NATDrop(nat.ReasonARPConflict)] - s0.Drops[dataplane.NATDrop(nat.ReasonARPConflict)]
	n, _ := l.neighbour(t, natGateway)
	var sent, received int
	if i := strings.Index(pr.out, " packets transmitted"); i >= 0 {
		fmt.Sscanf(pr.out[strings.LastIndexByte(pr.out[:i], '\n')+1:], "%d packets transmitted, %d received", &sent, &received)
	}
	t.Logf("attack: name=arp_spoof claims=%d spray=%d conflicts_counted=%d gateway_mac=%s lan_conns=%d/10 pings=%d/%d gw_rx=%d attacker_diverted=%d attacker_own=%d arp_requests_sent=%d",
		claims, 10*251, conflicts, n.MAC, conns.OK, received, sent, gwGot, diverted, toAttacker, s1.NAT.ARPRequests-s0.NAT.ARPRequests)

	if diverted != 0 {
		t.Errorf("%d IPv4 packets for others reached the attacker: %v", diverted, divertedSample)
	}
	if n.MAC != net.HardwareAddr(gwMAC[:]).String() {
		t.Errorf("after the attack the box has the gateway at %s, want %v (the attacker is %v)", n.MAC, net.HardwareAddr(gwMAC[:]), net.HardwareAddr(atkMAC[:]))
	}
	if conns.OK != 10 {
		t.Errorf("%d of 10 LAN connections during the attack: %v", conns.OK, conns.Errors)
	}
	if sent != 500 || received < 475 || gwGot < uint64(sent) {
		t.Errorf("pings during the attack: %d of %d answered, the gateway received %d frames; want at least 95%% answered, all through the gateway\n%s %v",
			received, sent, gwGot, pr.out, pr.err)
	}
	if conflicts < uint64(claims) {
		t.Errorf("%d ARP conflicts counted for %d claims", conflicts, claims)
	}
}

const macFloodConfig = `{
  "version": 2,
  "mode": "bridge",
  "ports": [
    {"name": "lan1", "interface": "p1"},
    {"name": "lan2", "interface": "p2"},
    {"name": "lan3", "interface": "p3"}
  ],
  "hostPort": {"interface": "e1khost0", "addresses": ["10.50.0.254/24"]},
  "bridge": {"fdbFull": "%s"}
}
`

// TestBridgeMACFlood: h3 floods the bridge with 100k frames from random
// source MACs (the CAM-overflow attack) while h1 sends an iperf3 stream
// to h2: the stream keeps at least 90 % of its rate without the flood,
// and none of h1's and h2's unicast leaks out of the attacker's port —
// with the default full-table policy (evict) and then with refuse.
func TestBridgeMACFlood(t *testing.T) {
	l := newLab(t, 3)
	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(macFloodConfig, "evict")), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start("-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	l.mustHost(t, 1, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.50.0.2")
	l.mustHost(t, 3, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.50.0.1")
	iperf3Server(t, l.hosts[1], 5201)
	var base iperfResult
	eventually(t, 5*time.Second, "iperf3 baseline", func() (bool, string) {
		r, err := iperf3(l.hosts[0], "-c", "10.50.0.2", "-t", "3", "-b", streamRate)
		base = r
		return err == nil && r.End.SumReceived.Bytes > 0, fmt.Sprint(err)
	})
	baseRate := base.End.SumReceived.BitsPerSecond
	t.Logf("attack: name=mac_flood_baseline stream_mbit=%.1f retransmits=%d", baseRate/1e6, base.End.SumSent.Retransmits)
	for i, policy := range []string{"evict", "refuse"} {
		if i > 0 {
			l.apply(t, fmt.Sprintf(macFloodConfig, policy), true)
		}
		t.Run(policy, func(t *testing.T) {
			seed := uint64(10 * i)
			attempts(t, func() ([]string, string) {
				seed++
				return l.macFlood(t, policy, seed, baseRate)
			})
		})
	}
}

// macFlood runs one flood of TestBridgeMACFlood and returns what it
// found wrong (see attempts).
func (l *lab) macFlood(t *testing.T, policy string, seed uint64, baseRate float64) ([]string, string) {
	const n, rate = 100000, 25000
	h1, h2, h3 := [6]byte{0x02, 0x50, 0, 0, 0, 1}, [6]byte{0x02, 0x50, 0, 0, 0, 2}, [6]byte{0x02, 0x50, 0, 0, 0, 3}
	// The flood's frames go to h3 itself, so the bridge learns their
	// sources and forwards none of them: what it does to the FDB is the
	// attack, not a storm of frames to the other ports.
	rng := rand.New(rand.NewPCG(18, 7+seed))
	payload := make([]byte, 46)
	frame := func(int) []byte {
		src := [6]byte{0x02, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
		return rawFrame(h3, src, 0x88b5, payload)
	}
	leaks := l.capture(t, 3)
	leaked := make(chan int, 1)
	go func() {
		leaked <- leaks(time.Duration(n/rate)*time.Second+time.Second, func(p afpacket.Packet) bool {
			return len(p.Data) >= 6 && ([6]byte(p.Data) == h1 || [6]byte(p.Data) == h2)
		})
	}()
	s0 := l.stats(t)
	rx3 := l.rxPackets(t, 3)
	cpu := l.cpuMeter(t)
	flood := startFlood(t, l.hosts[2], "eth0", rate, n, frame)
	time.Sleep(300 * time.Millisecond)
	st, err := iperf3(l.hosts[0], "-c", "10.50.0.2", "-t", "3", "-b", streamRate)
	if err != nil {
		t.Fatalf("iperf3 under the MAC flood: %v", err)
	}
	fr := flood()
	use := cpu.read(t)
	got := <-leaked
	s1 := l.stats(t)
	rx := l.rxPackets(t, 3) - rx3
	tx3 := l.port(t, s1, "lan3").TxPackets - l.port(t, s0, "lan3").TxPackets
	in3 := l.port(t, s1, "lan3").RxPackets - l.port(t, s0, "lan3").RxPackets
	rate1 := st.End.SumReceived.BitsPerSecond
	t.Logf("attack: name=mac_flood_%s sent=%d took=%v rate=%.0f/s box_rx=%d box_cpu=%.0f%% box_cpu_wait=%.0f%% cpu_pressure=%s fdb_entries=%d/%d learned=%d evicted=%d refused=%d leaked_to_attacker=%d attacker_rx=%d lan3_tx=%d stream_mbit=%.1f baseline_mbit=%.1f ratio=%.3f retransmits=%d",
		policy, fr.Sent, fr.Took.Round(time.Millisecond), fr.Rate(), in3, use.Used, use.Waited, cpuPressure(), s1.FDB.Entries, s1.FDB.Capacity,
		s1.FDB.Learned-s0.FDB.Learned, s1.FDB.Evicted-s0.FDB.Evicted, s1.FDB.Refused-s0.FDB.Refused,
		got, rx, tx3, rate1/1e6, baseRate/1e6, rate1/baseRate, st.End.SumSent.Retransmits)

	if fr.Sent != n {
		t.Fatalf("the generator sent %d of %d frames (%v)", fr.Sent, n, fr.Err)
	}
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if s1.FDB.Entries < s1.FDB.Capacity*9/10 {
		add("the flood filled the FDB to %d of %d entries: did it reach the box?", s1.FDB.Entries, s1.FDB.Capacity)
	}
	if got != 0 || tx3 > 50 {
		add("%d of h1's and h2's unicast frames reached the attacker; lan3 sent %d frames in all during the flood", got, tx3)
	}
	if rate1 < 0.9*baseRate {
		add("iperf3 h1 → h2 under the MAC flood: %.1f Mbit/s, want at least 90%% of its %.1f Mbit/s without it", rate1/1e6, baseRate/1e6)
	}
	want := map[[6]byte]string{h1: "lan1", h2: "lan2"}
	for _, e := range l.fdb(t) {
		if port, ok := want[e.MAC]; ok && e.PortName == port {
			delete(want, e.MAC)
		}
	}
	if len(want) != 0 {
		add("after the flood the FDB lacks %v", want)
	}
	// The rate is not the test's here (100k frames is).
	return p, starved(use)
}
