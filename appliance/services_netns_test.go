package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/internal/dhcptest"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// The services suite runs the appliance binary in NAT mode as a home
// router behind an ISP:
//
//	isp (100.64.0.1/24, MTU 1400): dnsmasq (DHCP for the WAN, DNS for www.isp.test), servers
//	  └─ p1 [box: wan by DHCP | lan 192.168.7.1/24, DHCP server, DNS] p2, p3, p4
//	                                                                   └─ LAN hosts h1..h3, by DHCP
//
// The WAN's MTU of 1400 reaches the box only through the lease (option
// 26): packets bigger than that must leave fragmented.

const (
	svcISP    = "100.64.0.1"
	svcRouter = "192.168.7.1"
)

// svcLab is the services lab: the box, the ISP and the LAN hosts.
type svcLab struct {
	*lab
	isp     *netnstest.Namespace
	lan     []*netnstest.Namespace // h1..h3, eth0 on p2..p4
	clients []*dhcptest.Client
	cfgPath string
	ispCmd  *exec.Cmd // dnsmasq
}

const svcConfig = `{
  "version": 3,
  "mode": "nat",
  "ports": [
    {"name": "wan", "interface": "p1", "role": "wan"},
    {"name": "lan1", "interface": "p2", "role": "lan", "addresses": ["192.168.7.1/24"]},
    {"name": "lan2", "interface": "p3", "role": "lan"},
    {"name": "lan3", "interface": "p4", "role": "lan"}
  ],
  "nat": {"wanDHCP": true, "forwards": [{"proto": "tcp", "wanPorts": "8081", "lanHost": "192.168.7.50", "lanPort": 8080}]},
  "dhcp": {"leaseTime": "10m", "static": [{"mac": "02:77:00:00:00:02", "address": "192.168.7.50", "hostname": "printer"}]},
  "dns": {"domain": "lan"},
  "time": {"servers": ["100.64.0.1"]},
  "dashboard": {"internetProbe": "100.64.0.1"}
}
`

func newSvcLab(t *testing.T, dnsmasqArgs ...string) *svcLab {
	t.Helper()
	requireNetns(t)
	testenv.Require(t, "dnsmasq", "dhclient", "udhcpc", "dig")
	l := &svcLab{lab: &lab{t: t, dir: t.TempDir()}}
	l.box = netnstest.New(t, "e1ksb")
	l.box.IP(t, "link", "set", "lo", "up")
	l.isp = netnstest.New(t, "e1ksi")
	l.isp.IP(t, "link", "set", "lo", "up")
	noOff := []string{"gro", "gso", "tso", "tx", "rx"}
	netnstest.Veth(t, netnstest.End{NS: l.box, Name: "p1", Off: noOff, Up: true},
		netnstest.End{NS: l.isp, Name: "eth0", Off: noOff, MTU: 1400, Addrs: []string{svcISP + "/24"}, Up: true})
	for i := range 3 {
		h := netnstest.New(t, fmt.Sprintf("e1ksh%d", i+1))
		h.IP(t, "link", "set", "lo", "up")
		netnstest.Veth(t, netnstest.End{NS: l.box, Name: fmt.Sprintf("p%d", i+2), Off: noOff, Up: true},
			netnstest.End{NS: h, Name: "eth0", Off: noOff, MAC: fmt.Sprintf("02:77:00:00:00:%02x", i+1), Up: true})
		l.lan = append(l.lan, h)
		l.clients = append(l.clients, dhcptest.New(t, h, "eth0", fmt.Sprintf("h%d", i+1), l.dir, true))
	}
	l.hosts = l.lan
	l.dnsmasq(t, "100.64.0.100,100.64.0.150", dnsmasqArgs...)
	l.cfgPath = filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(l.cfgPath, []byte(svcConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start("-config", l.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
	return l
}

// dnsmasq runs the ISP's DHCP and DNS server with a pool of addresses
// ("first,last"); it is killed at cleanup.
func (l *svcLab) dnsmasq(t *testing.T, pool string, extra ...string) *exec.Cmd {
	args := []string{"dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--interface=eth0", "--bind-interfaces",
		"--dhcp-range=" + pool + ",255.255.255.0,2m", "--dhcp-option=option:router," + svcISP,
		"--dhcp-option=option:dns-server," + svcISP, "--dhcp-option=26,1400", "--dhcp-authoritative",
		"--dhcp-leasefile=" + filepath.Join(l.dir, "isp.leases"),
		"--address=/www.isp.test/" + svcISP, "--no-resolv", "--no-hosts", "--log-dhcp", "--log-queries"}
	cmd := l.isp.Command(append(args, extra...)...)
	netnstest.StartLogged(t, "the ISP's dnsmasq", cmd)
	l.ispCmd = cmd
	return cmd
}

// wan returns the router's WAN address (a prefix) once the snapshot has
// one, failing after d.
func (l *svcLab) wan(t *testing.T, d time.Duration, not string) string {
	t.Helper()
	var w string
	eventually(t, d, "a WAN address from DHCP", func() (bool, string) {
		s := l.stats(t)
		if s.NAT != nil {
			w = s.NAT.WAN
		}
		return w != "" && w != not, fmt.Sprintf("nat %+v", s.NAT)
	})
	return w
}

// ispLeases reads dnsmasq's lease file: the addresses it gave.
func (l *svcLab) ispLeases() string {
	b, _ := os.ReadFile(filepath.Join(l.dir, "isp.leases"))
	return string(b)
}

// payload is the test's UDP data of n bytes and its digest.
func payload(n int) ([]byte, string) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	s := sha256.Sum256(b)
	return b, hex.EncodeToString(s[:8])
}

func TestRouterServices(t *testing.T) {
	l := newSvcLab(t)
	w := l.wan(t, 20*time.Second, "")
	t.Logf("WAN address %s", w)
	if !strings.Contains(l.ispLeases(), strings.Split(w, "/")[0]) {
		t.Errorf("the ISP's lease file does not have %s:\n%s", w, l.ispLeases())
	}
	if s := l.stats(t); s.NAT.WANMTU != 1400 || s.NAT.Gateway != svcISP {
		t.Errorf("router WAN MTU %d gateway %q, want 1400 from the lease and %s", s.NAT.WANMTU, s.NAT.Gateway, svcISP)
	}

	h1, h2 := l.clients[0], l.clients[1]
	h1.Dhclient(t)
	h2.Udhcpc(t)
	ev1, _ := h1.WaitEvent(t, 0, "BOUND")
	ev2, _ := h2.WaitEvent(t, 0, "bound")
	for _, ev := range []dhcptest.Event{ev1, ev2} {
		if ev["router"] != svcRouter || ev["dns"] != svcRouter || ev["domain"] != "lan" || !strings.HasPrefix(ev["ip"], "192.168.7.") {
			t.Errorf("LAN lease %v: want an address of 192.168.7.0/24, router and DNS %s, domain lan", ev, svcRouter)
		}
	}
	if ev2["ip"] != "192.168.7.50" {
		t.Errorf("h2 (static lease) got %s, want 192.168.7.50", ev2["ip"])
	}

	t.Run("gateway and DNS", func(t *testing.T) {
		l.mustHost(t, 1, "ping", "-c", "2", "-i", "0.2", "-W", "2", svcISP)
		dig := func(h int, name string) string {
			out, err := l.host(h, "dig", "+short", "+time=2", "+tries=2", "@"+svcRouter, name)
			if err != nil {
				t.Errorf("dig %s from h%d: %v\n%s", name, h, err, out)
			}
			return strings.TrimSpace(out)
		}
		if got := dig(1, "www.isp.test"); got != svcISP {
			t.Errorf("www.isp.test from the box's DNS: %q, want %s (from the ISP's)", got, svcISP)
		}
		if got := dig(2, "h1-dhclient.lan"); got != ev1["ip"] {
			t.Errorf("h1-dhclient.lan: %q, want %s (its lease)", got, ev1["ip"])
		}
		if got := dig(1, "printer.lan"); got != "192.168.7.50" {
			t.Errorf("printer.lan: %q, want the static lease's 192.168.7.50", got)
		}
		// Never on the WAN side.
		if out, err := l.isp.Output("dig", "+short", "+time=1", "+tries=1", "@"+strings.Split(w, "/")[0], "www.isp.test"); err == nil && strings.TrimSpace(out) != "" && !strings.Contains(out, "timed out") {
			t.Errorf("the box's DNS answered the WAN side: %q", out)
		}
	})

	t.Run("a port forward to the static lease", func(t *testing.T) {
		_, _, srv := l.helper(t, 2, "serve", ":8080", ":7", filepath.Join(l.dir, "h2.log"))
		if s := line(t, srv, 5*time.Second); s != "serving" {
			t.Fatalf("server: %q", s)
		}
		out, err := l.isp.Output("curl", "-s", "--max-time", "5", "http://"+strings.Split(w, "/")[0]+":8081/")
		if err != nil || !strings.Contains(out, svcISP) {
			t.Errorf("the ISP to the WAN address's port 8081 → h2: %v %q", err, out)
		}
	})

	t.Run("fragmentation through a 1400-byte WAN", func(t *testing.T) {
		l.mustHost(t, 1, "ping", "-c", "2", "-s", "3000", "-W", "2", svcISP)
		l.mustHost(t, 1, "ping", "-c", "2", "-s", "1450", "-M", "dont", "-W", "2", svcISP)
		_, _, echo := helperIn(t, l.isp, "udpecho", ":9000")
		if s := line(t, echo, 5*time.Second); s != "serving" {
			t.Fatalf("udp echo: %q", s)
		}
		_, in, out := l.helper(t, 1, "udpc", "0")
		_, digest := payload(3000)
		fmt.Fprintf(in, "send %s:9000 3000\n", svcISP)
		if got := line(t, out, 5*time.Second); !strings.HasSuffix(got, " 3000 "+digest) {
			t.Errorf("a 3000-byte datagram through the box: %q, want it back whole (digest %s)", got, digest)
		}
		if s := l.stats(t); s.NAT.FragmentsOut == 0 {
			t.Errorf("the box made no fragments: %+v", s.NAT)
		}
	})

	h3 := l.clients[2]
	h3Proc := h3.Udhcpc(t)
	ev3, _ := h3.WaitEvent(t, 0, "bound")

	t.Run("UDP hairpin", func(t *testing.T) {
		_, _, stun := helperIn(t, l.isp, "udpecho", ":3478")
		line(t, stun, 5*time.Second)
		_, aIn, aOut := l.helper(t, 1, "udpc", "4000")
		fmt.Fprintf(aIn, "whoami %s:3478\n", svcISP)
		f := strings.Fields(line(t, aOut, 5*time.Second)) // recv FROM MAPPING
		if len(f) != 3 || f[1] != svcISP+":3478" {
			t.Fatalf("whoami: %q", f)
		}
		mapped := f[2]
		_, bIn, _ := l.helper(t, 3, "udpc", "5000")
		fmt.Fprintf(bIn, "send %s 100\n", mapped)
		got := line(t, aOut, 5*time.Second)
		if !strings.HasPrefix(got, "recv "+strings.Split(w, "/")[0]+":") {
			t.Errorf("h1 behind mapping %s got %q, want h3's datagram from the WAN address", mapped, got)
		}
	})

	t.Run("a DISCOVER flood does not stop a known device renewing", func(t *testing.T) {
		frames := discoverFlood(t, 10000)
		toHost := func() uint64 { return l.port(t, l.stats(t), "host").TxPackets }
		before := toHost()
		// The flood goes on, round the 10000 frames, until h3 renewed and
		// all of them were sent once.
		_, flood := background(t, func(stop <-chan struct{}) error {
			for i := 0; ; i = (i + 500) % len(frames) {
				if err := l.hosts[0].In(func() error { return sendRaw("eth0", frames[i:i+500]) }); err != nil {
					return fmt.Errorf("send on h1: %w", err)
				}
				time.Sleep(20 * time.Millisecond)
				if stopped(stop) && i+500 >= len(frames) {
					return nil
				}
			}
		})
		time.Sleep(100 * time.Millisecond) // into the flood
		from := len(h3.Events())
		h3Proc.Process.Signal(syscall.SIGUSR1) // renew now
		ev, _ := h3.WaitEvent(t, from, "renew", "bound")
		if err := flood(); err != nil {
			t.Fatal(err)
		}
		if ev["ip"] != ev3["ip"] {
			t.Errorf("h3 renewing during the flood: %v, want %s again", ev, ev3["ip"])
		}
		if n := toHost() - before; n < 10000 {
			t.Errorf("the box's DHCP server got %d frames, want the flood's 10000 at least", n)
		}
	})

	t.Run("the services stop in bridge mode", func(t *testing.T) {
		bridge := `{"version": 3, "mode": "bridge", "ports": [{"name": "wan", "interface": "p1"}, {"name": "lan1", "interface": "p2"},
			{"name": "lan2", "interface": "p3"}, {"name": "lan3", "interface": "p4"}], "hostPort": {}}`
		start := time.Now()
		l.apply(t, bridge, true)
		took := time.Since(start)
		t.Logf("NAT with services → bridge applied in %v", took.Round(time.Millisecond))
		if took > 5*time.Second {
			t.Errorf("the change took %v; stopping the services should take well under a second", took)
		}
		if out := l.box.Run(t, "ss", "-Hlnu"); strings.Contains(out, ":67 ") || strings.Contains(out, ":53 ") {
			t.Errorf("DHCP or DNS still listening in bridge mode:\n%s", out)
		}
		l.apply(t, svcConfig, true)
		l.wan(t, 20*time.Second, "")
	})

	t.Run("leases survive a restart", func(t *testing.T) {
		l.stop()
		l.start("-config", l.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
		l.wan(t, 20*time.Second, "")
		// h3 asks for h1's address: the box still knows it is h1's.
		from := len(h3.Events())
		h3.Udhcpc(t, "-q", "-r", ev1["ip"])
		ev, _ := h3.WaitEvent(t, from, "bound")
		if ev["ip"] == ev1["ip"] {
			t.Errorf("after the restart h3 was given h1's %s: the box forgot h1's lease", ev1["ip"])
		}
	})
}

// discoverFlood is n DHCPDISCOVERs from random MACs, broadcast.
func discoverFlood(t *testing.T, n int) [][]byte {
	t.Helper()
	frames := make([][]byte, n)
	for i := range frames {
		mac := net.HardwareAddr{0x02, 0xfd, byte(i >> 16), byte(i >> 8), byte(i), byte(i * 7)}
		m, err := dhcpv4.NewDiscovery(mac)
		if err != nil {
			t.Fatal(err)
		}
		ip := frametest.IPv4{Src: [4]byte{}, Dst: [4]byte{255, 255, 255, 255}}
		var src [6]byte
		copy(src[:], mac)
		frames[i] = frametest.Frame(bcast, src, frame.EtherTypeIPv4, ip.UDPPacket(68, 67, m.ToBytes()))
	}
	return frames
}

// TestWANLease follows the WAN lease through its life with dnsmasq as the
// ISP (leases of 2 minutes, dnsmasq's shortest; T1 5 s, T2 10 s): it is
// renewed; when the ISP changes the address the box's connections through
// the old one go and new ones use the new one; when the ISP's server is
// gone past the expiry the box gives the address up, and takes a new one
// when the server is back.
func TestWANLease(t *testing.T) {
	t.Parallel()
	short := []string{"--dhcp-option=option:T1,5", "--dhcp-option=option:T2,10"}
	l := newSvcLab(t, short...)
	w1 := l.wan(t, 20*time.Second, "")
	h1 := l.clients[0]
	h1.Dhclient(t)
	h1.WaitEvent(t, 0, "BOUND")
	logPath := filepath.Join(l.dir, "http.log")
	_, _, srv := helperIn(t, l.isp, "serve", ":8080", ":7", logPath)
	if s := line(t, srv, 5*time.Second); s != "serving" {
		t.Fatalf("server: %q", s)
	}
	curl := func() string {
		out, err := l.host(1, "curl", "-s", "--max-time", "3", "http://"+svcISP+":8080/")
		if err != nil {
			t.Errorf("curl from h1 to the ISP: %v %s", err, out)
		}
		return out
	}
	if got := curl(); !strings.Contains(got, strings.Split(w1, "/")[0]) {
		t.Errorf("the ISP sees h1 as %q, want the WAN address %s", got, w1)
	}
	l.mustHost(t, 1, "ping", "-c", "1", "-W", "2", svcISP) // a connection through w1

	t.Run("renewal", func(t *testing.T) {
		first := l.ispLeases()
		eventually(t, 15*time.Second, "a renewal (the ISP's lease file rewritten)", func() (bool, string) {
			return l.ispLeases() != first, l.ispLeases()
		})
		if w := l.wan(t, time.Second, ""); w != w1 {
			t.Errorf("WAN address after the renewal: %s, want %s", w, w1)
		}
	})

	changed := false
	t.Run("the ISP changes the address", func(t *testing.T) {
		l.stopDnsmasq(t)
		os.Remove(filepath.Join(l.dir, "isp.leases"))
		l.dnsmasq(t, "100.64.0.200,100.64.0.210", short...)
		w2 := l.wan(t, 30*time.Second, w1)
		t.Logf("WAN address %s → %s", w1, w2)
		old := strings.Split(w1, "/")[0]
		for _, c := range l.conntrack(t, "limit=1000").Conns {
			if c.Reply.Dst.Addr().String() == old {
				t.Errorf("a connection through the old address is left: %+v", c)
			}
		}
		if got := curl(); !strings.Contains(got, strings.Split(w2, "/")[0]) {
			t.Errorf("the ISP sees h1 as %q, want the new WAN address %s", got, w2)
		}
		changed = true
	})

	t.Run("the ISP's server gone past the expiry, then back", func(t *testing.T) {
		if !changed {
			t.Fatal("the address change failed: the lease's end is not tried")
		}
		l.stopDnsmasq(t)
		gone := time.Now()
		eventually(t, 150*time.Second, "the WAN address given up", func() (bool, string) {
			s := l.stats(t)
			return s.NAT != nil && s.NAT.WAN == "", fmt.Sprintf("nat %+v", s.NAT)
		})
		t.Logf("the box gave the address up %v after the server went", time.Since(gone).Round(time.Second))
		if out, err := l.host(1, "ping", "-c", "1", "-W", "1", svcISP); err == nil {
			t.Errorf("h1 reaches the ISP without a WAN address:\n%s", out)
		}
		l.dnsmasq(t, "100.64.0.200,100.64.0.210", short...)
		back := time.Now()
		l.wan(t, 90*time.Second, "")
		t.Logf("a new lease %v after the server came back", time.Since(back).Round(time.Second))
		l.mustHost(t, 1, "ping", "-c", "1", "-W", "2", svcISP)
	})
}

// stopDnsmasq ends the ISP's dnsmasq.
func (l *svcLab) stopDnsmasq(t *testing.T) {
	t.Helper()
	l.ispCmd.Process.Kill()
	l.ispCmd.Wait() // the cleanup's Wait then returns at once
}
