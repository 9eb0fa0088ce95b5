package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/frame"
)

const threePortConfig = `{
  "version": 2,
  "mode": "bridge",
  "ports": [
    {"name": "lan1", "interface": "p1"},
    {"name": "lan2", "interface": "p2"},
    {"name": "lan3", "interface": "p3"}
  ],
  "hostPort": {"interface": "e1khost0", "addresses": ["10.50.0.254/24", "fd50::fe/64"]},
  "bridge": {"fdbAging": "3s"},
  "rules": {"rules": [{"l4proto": "tcp", "dport": "9", "action": "reject", "comment": "discard service"}]}
}
`

func TestBridgeThreePorts(t *testing.T) {
	l := newLab(t, 3)
	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(threePortConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start("-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))

	t.Run("healthz", func(t *testing.T) {
		code, body := l.boxGet("/healthz")
		var h struct {
			Status    string
			Dataplane dataplane.Health
		}
		if err := json.Unmarshal([]byte(body), &h); err != nil || code != 200 {
			t.Fatalf("/healthz %d %s: %v", code, body, err)
		}
		if h.Status != "ok" || !h.Dataplane.OK || len(h.Dataplane.Ports) != 4 {
			t.Errorf("/healthz = %s", body)
		}
		for _, p := range h.Dataplane.Ports {
			if !p.LinkUp || p.Running != p.Workers || p.Workers == 0 {
				t.Errorf("port %+v not up and running", p)
			}
		}
	})

	t.Run("ping and ARP", func(t *testing.T) {
		l.mustHost(t, 1, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.50.0.2")
		l.mustHost(t, 3, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.50.0.1")
		neigh := l.mustHost(t, 1, "ip", "neigh", "show", "10.50.0.2")
		if !strings.Contains(neigh, "02:50:00:00:00:02") {
			t.Errorf("h1 has no ARP entry for h2: %q", neigh)
		}
	})

	t.Run("ping6 and neighbour discovery", func(t *testing.T) {
		l.mustHost(t, 1, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd50::2")
		neigh := l.mustHost(t, 1, "ip", "-6", "neigh", "show", "fd50::2")
		if !strings.Contains(neigh, "02:50:00:00:00:02") {
			t.Errorf("h1 has no neighbour entry for h2: %q", neigh)
		}
	})

	t.Run("known unicast reaches only its port", func(t *testing.T) {
		l.mustHost(t, 1, "ping", "-c", "1", "-W", "2", "10.50.0.2") // both learned
		before := l.rxPackets(t, 3)
		tx3 := l.port(t, l.stats(t), "lan3").TxPackets
		l.mustHost(t, 1, "ping", "-q", "-c", "200", "-i", "0.005", "-W", "2", "10.50.0.2")
		got := l.rxPackets(t, 3) - before
		gotTx := l.port(t, l.stats(t), "lan3").TxPackets - tx3
		// 400 frames crossed the bridge; h3 may see a little background
		// (IPv6 multicast), not the pings.
		if got > 40 || gotTx > 40 {
			t.Errorf("h3 received %d frames (lan3 sent %d) during 200 pings between h1 and h2", got, gotTx)
		}
	})

	t.Run("iperf3 TCP and UDP", func(t *testing.T) {
		pidfile := filepath.Join(l.dir, "iperf3.pid")
		l.mustHost(t, 2, "iperf3", "-s", "-D", "--pidfile", pidfile)
		defer killPidfile(pidfile)
		res := l.tcpRuns(t, 1, 1e6, "10.50.0.2")
		t.Logf("TCP through the bridge: %.1f Mbit/s", res.End.SumReceived.BitsPerSecond/1e6)
		s0 := l.stats(t)
		out := l.mustHost(t, 1, "iperf3", "-c", "10.50.0.2", "-u", "-b", "20M", "-t", "2", "-J")
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		s1 := l.stats(t)
		t.Logf("UDP through the bridge: %.0f packets, %.2f%% lost end to end", res.End.Sum.Packets, res.End.Sum.LostPercent)
		// End-to-end loss depends on the receiver getting CPU on a shared
		// machine (h2's socket buffer overflows under load), so the bridge
		// is judged by its own counters: everything it read from lan1 left
		// the bridge, nothing was dropped, and most datagrams arrived. Left
		// the bridge, not lan2 alone: h1 may also send a frame or two to
		// h3 or the box meanwhile (neighbour probes), which leave on lan3
		// or the host port.
		in := l.port(t, s1, "lan1").RxPackets - l.port(t, s0, "lan1").RxPackets
		var fwd uint64
		for _, p := range s1.Ports {
			if p.Name != "lan1" {
				fwd += p.TxPackets - l.port(t, s0, p.Name).TxPackets
			}
		}
		drops := s1.Drops.Total() - s0.Drops.Total()
		if in < uint64(res.End.Sum.Packets)/2 || fwd < in || drops != 0 || res.End.Sum.LostPercent > 90 {
			b, _ := json.MarshalIndent(s1, "", " ")
			snmp, _ := l.host(2, "cat", "/proc/net/snmp")
			t.Errorf("UDP: %.0f datagrams sent, bridge read %d from lan1, sent %d on the other ports, dropped %d; %.1f%% lost end to end\nstats:\n%s\nh2 /proc/net/snmp:\n%s",
				res.End.Sum.Packets, in, fwd, drops, res.End.Sum.LostPercent, b, snmp)
		}
	})

	t.Run("DHCP across the bridge", func(t *testing.T) {
		leases := filepath.Join(l.dir, "dnsmasq.leases")
		dnsmasq := l.hosts[2].Command("dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
			"--port=0", "--interface=eth0", "--bind-interfaces", "--dhcp-range=10.50.0.100,10.50.0.150,2m",
			"--dhcp-leasefile="+leases, "--pid-file="+filepath.Join(l.dir, "dnsmasq.pid"), "--conf-file=/dev/null")
		var dlog bytes.Buffer
		dnsmasq.Stdout, dnsmasq.Stderr = &dlog, &dlog
		if err := dnsmasq.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			dnsmasq.Process.Signal(syscall.SIGTERM)
			dnsmasq.Wait()
		}()
		time.Sleep(200 * time.Millisecond)
		lf := filepath.Join(l.dir, "dhclient.leases")
		pf := filepath.Join(l.dir, "dhclient.pid")
		// dhclient goes to the background once it has a lease: stop it
		// through its pid file.
		defer killPidfile(pf)
		out, err := l.host(1, "timeout", "30", "dhclient", "-1", "-4", "-v", "-pf", pf, "-lf", lf, "-sf", "/bin/true", "eth0")
		if err != nil {
			t.Fatalf("dhclient: %v\n%s\ndnsmasq:\n%s", err, out, dlog.String())
		}
		b, _ := os.ReadFile(lf)
		if !strings.Contains(string(b), "fixed-address 10.50.0.1") {
			t.Errorf("no lease from dnsmasq across the bridge:\n%s\n%s", b, out)
		}
	})

	t.Run("VLAN-tagged traffic", func(t *testing.T) {
		// VLAN subinterfaces where the kernel has 802.1Q (the build host's
		// kernel may not: CONFIG_VLAN_8021Q).
		if out, err := l.host(1, "ip", "link", "add", "link", "eth0", "name", "eth0.10", "type", "vlan", "id", "10"); err != nil {
			t.Logf("no VLAN subinterfaces on this kernel (%s): tagged frames are sent raw instead", strings.TrimSpace(out))
		} else {
			l.mustHost(t, 2, "ip", "link", "add", "link", "eth0", "name", "eth0.10", "type", "vlan", "id", "10")
			for i := 1; i <= 2; i++ {
				l.mustHost(t, i, "ip", "addr", "add", fmt.Sprintf("10.51.0.%d/24", i), "dev", "eth0.10")
				l.mustHost(t, i, "ip", "link", "set", "eth0.10", "up")
			}
			l.mustHost(t, 1, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.51.0.2")
		}
		// Raw tagged frames: h2 announces itself in VLAN 10, then h1 sends
		// it tagged unicast frames; h2 must get them with the tag (PCP
		// included) and h3 must not.
		h1, h2 := [6]byte{0x02, 0x50, 0, 0, 0, 1}, [6]byte{0x02, 0x50, 0, 0, 0, 2}
		const tci = 5<<13 | 10
		tagged := func(dst, src [6]byte, seq byte) []byte {
			return rawFrame(dst, src, 0x8100, append([]byte{tci >> 8, tci & 0xff, 0x88, 0xb5, 0xe1, seq}, make([]byte, 40)...))
		}
		l.send(t, 2, tagged(bcast, h2, 0))
		eventually(t, 2*time.Second, "h2 learned in VLAN 10", func() (bool, string) {
			for _, e := range l.fdb(t) {
				if e.VLAN == 10 && e.MAC == h2 && e.PortName == "lan2" {
					return true, ""
				}
			}
			return false, fmt.Sprint(l.fdb(t))
		})
		rx2 := l.capture(t, 2)
		rx3 := l.capture(t, 3)
		for seq := byte(1); seq <= 5; seq++ {
			l.send(t, 1, tagged(h2, h1, seq))
		}
		got2 := rx2(time.Second, func(p afpacket.Packet) bool {
			return p.HasVLAN && p.VLANTCI == tci && len(p.Data) > 16 && p.Data[12] == 0x88 && p.Data[14] == 0xe1
		})
		got3 := rx3(200*time.Millisecond, func(p afpacket.Packet) bool { return len(p.Data) > 16 && p.Data[14] == 0xe1 })
		if got2 != 5 || got3 != 0 {
			t.Errorf("tagged unicast: h2 got %d of 5 with tag %#x, h3 got %d (want 0)", got2, tci, got3)
		}
	})

	t.Run("reject rule answers with a RST", func(t *testing.T) {
		pidfile := filepath.Join(l.dir, "iperf3-9.pid")
		l.mustHost(t, 2, "iperf3", "-s", "-p", "9", "-D", "--pidfile", pidfile)
		defer killPidfile(pidfile)
		time.Sleep(200 * time.Millisecond)
		before := l.port(t, l.stats(t), "lan1").RejectsSent
		out, err := l.host(1, "curl", "-s", "--max-time", "3", "http://10.50.0.2:9/")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 { // 7: failed to connect (refused)
			t.Errorf("curl to a rejected port: %v %s, want connection refused", err, out)
		}
		if n := l.port(t, l.stats(t), "lan1").RejectsSent - before; n == 0 {
			t.Errorf("no reject answer counted")
		}
	})

	t.Run("host port reachable from bridged hosts", func(t *testing.T) {
		l.mustHost(t, 2, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.50.0.254")
		l.mustHost(t, 2, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "fd50::fe")
		out := l.mustHost(t, 2, "curl", "-s", "--max-time", "3", "http://10.50.0.254:8080/healthz")
		if !strings.Contains(out, `"status":"ok"`) {
			t.Errorf("/healthz through the host port: %s", out)
		}
		// TCP into the box's own stack through the TAP (read/write per frame).
		pidfile := filepath.Join(l.dir, "iperf3-box.pid")
		l.box.Run(t, "iperf3", "-s", "-B", "10.50.0.254", "-p", "5202", "-D", "--pidfile", pidfile)
		defer killPidfile(pidfile)
		res := l.tcpRuns(t, 2, 1e5, "10.50.0.254", "-p", "5202")
		t.Logf("TCP to the host port: %.1f Mbit/s", res.End.SumReceived.BitsPerSecond/1e6)
	})

	t.Run("aging", func(t *testing.T) {
		ghost := [6]byte{0x02, 0x99, 0, 0, 0, 0x42}
		l.send(t, 3, rawFrame(bcast, ghost, 0x88b5, make([]byte, 46)))
		has := func() bool {
			for _, e := range l.fdb(t) {
				if e.MAC == ghost {
					return true
				}
			}
			return false
		}
		eventually(t, 2*time.Second, "ghost MAC learned", func() (bool, string) { return has(), "" })
		start := time.Now()
		eventually(t, 6*time.Second, "ghost MAC aged out", func() (bool, string) { return !has(), "" })
		if d := time.Since(start); d < time.Second {
			t.Errorf("aged out after %v with an aging time of 3 s", d)
		}
	})

	t.Run("broadcast storm does not loop", func(t *testing.T) {
		const n = 3000
		src := [6]byte{0x02, 0x77, 0, 0, 0, 1}
		storm := make([][]byte, n)
		for i := range storm {
			p := make([]byte, 46)
			binary.BigEndian.PutUint32(p, uint32(i))
			storm[i] = rawFrame(bcast, src, 0x88b5, p)
		}
		s0 := l.stats(t)
		rx1, rx2, rx3 := l.rxPackets(t, 1), l.rxPackets(t, 2), l.rxPackets(t, 3)
		l.send(t, 1, storm...)
		time.Sleep(500 * time.Millisecond)
		s1 := l.stats(t)
		in := l.port(t, s1, "lan1").RxPackets - l.port(t, s0, "lan1").RxPackets
		d1, d2, d3 := l.rxPackets(t, 1)-rx1, l.rxPackets(t, 2)-rx2, l.rxPackets(t, 3)-rx3
		if in < n*9/10 || d2 < n*9/10 || d3 < n*9/10 {
			t.Errorf("storm of %d: bridge got %d, h2 %d, h3 %d", n, in, d2, d3)
		}
		if d2 > n+100 || d3 > n+100 || d1 > 100 {
			t.Errorf("storm of %d multiplied: h1 got %d back, h2 %d, h3 %d", n, d1, d2, d3)
		}
		// Nothing keeps circulating once the sender stopped.
		time.Sleep(500 * time.Millisecond)
		s2 := l.stats(t)
		for _, name := range []string{"lan1", "lan2", "lan3"} {
			if d := l.port(t, s2, name).RxPackets - l.port(t, s1, name).RxPackets; d > 50 {
				t.Errorf("%s still receiving after the storm: %d frames in 0.5 s", name, d)
			}
		}
	})

	t.Run("malformed frames are counted and dropped", func(t *testing.T) {
		before := l.stats(t).Drops
		src := [6]byte{0x02, 0x50, 0, 0, 0, 1}
		badIHL := make([]byte, 46)
		badIHL[0] = 0x42 // IPv4, IHL 2
		vlan4095 := []byte{0x0f, 0xff, 0x08, 0x06}
		vlan4095 = append(vlan4095, make([]byte, 42)...)
		l.send(t, 1, rawFrame(bcast, src, 0x0800, badIHL), rawFrame(bcast, src, 0x8100, vlan4095))
		eventually(t, 2*time.Second, "drops counted", func() (bool, string) {
			d := l.stats(t).Drops
			return d[frameReasonBadIHL] > before[frameReasonBadIHL] && d[frameReasonBadVLAN] > before[frameReasonBadVLAN],
				fmt.Sprintf("%v", d)
		})
		if code, _ := l.boxGet("/healthz"); code != 200 {
			t.Errorf("unhealthy after malformed frames: %d", code)
		}
	})

	t.Run("link down is reported", func(t *testing.T) {
		l.hosts[2].IP(t, "link", "set", "eth0", "down")
		eventually(t, 3*time.Second, "healthz degraded", func() (bool, string) {
			code, body := l.boxGet("/healthz")
			return code == 503 && strings.Contains(body, `"degraded"`), body
		})
		l.hosts[2].IP(t, "link", "set", "eth0", "up")
		eventually(t, 3*time.Second, "healthz ok again", func() (bool, string) {
			code, body := l.boxGet("/healthz")
			return code == 200, body
		})
	})

	if d := l.stop(); d > 5*time.Second {
		t.Errorf("SIGTERM took %v", d)
	}
	if out := l.box.IP(t, "link", "show"); strings.Contains(out, "e1khost0") {
		t.Errorf("host port still exists after stop:\n%s", out)
	}
}

// TestBridgeTwoPortsFromFlags runs the appliance as a benchmark would:
// no config file, the data ports given with -interfaces.
func TestBridgeTwoPortsFromFlags(t *testing.T) {
	l := newLab(t, 2)
	none := filepath.Join(l.dir, "none.json")
	l.start("-config", none, "-factory", none, "-interfaces", "p1,p2")
	l.mustHost(t, 1, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.50.0.2")
	l.mustHost(t, 2, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "fd50::1")
	s := l.stats(t)
	if len(s.Ports) != 2 || l.port(t, s, "p1").TxPackets == 0 || l.port(t, s, "p2").TxPackets == 0 {
		t.Errorf("stats %+v", s.Ports)
	}
	if d := l.stop(); d > 5*time.Second {
		t.Errorf("SIGTERM took %v", d)
	}
}

// Parser drop reasons as indices of dataplane.Drops.
var (
	frameReasonBadIHL  = dataplane.Drop(frame.ReasonBadIHL)
	frameReasonBadVLAN = dataplane.Drop(frame.ReasonBadVLAN)
)
