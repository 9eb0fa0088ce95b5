package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"e1kbox/webui"
)

// The NAT suite runs the appliance binary in NAT mode in a box namespace
// between a LAN and a WAN:
//
//	lan (10.60.0.10/24, MTU 2000, gw .1)
//	  └─ p1 [box: lan 10.60.0.1/24 MTU 2000, host port 10.60.0.2 | wan 10.61.0.2/24 MTU 1500] p2
//	                                                                  └─ gw (10.61.0.1/24 | 10.62.0.1/24, forwarding)
//	                                                                       └─ inet (10.62.0.10/24): the internet's servers
//
// with port forwards of WAN tcp 8081 to the LAN host's 8080 and udp 8082
// to its 8082. With natLab.wanSegment the WAN is a segment instead of a
// cable: a Linux bridge in a namespace of its own joins p2, the gateway's
// eth0 and an attacker host (10.61.0.66/24). Helper programs (servers,
// many-connection clients) are this test binary run again in a namespace
// with E1KBOX_NAT_HELPER set (see natHelper).

const (
	natLANHost  = "10.60.0.10"
	natRouter   = "10.60.0.1"
	natBoxHost  = "10.60.0.2"
	natWANAddr  = "10.61.0.2"
	natGateway  = "10.61.0.1"
	natServer   = "10.62.0.10"
	natAttacker = "10.61.0.66"
)

// natNS are the indices of the lab's hosts.
const (
	nsLAN  = 1
	nsGW   = 2
	nsInet = 3
	nsAtk  = 4 // with natLab.wanSegment
)

func natConfigJSON(conntrackSize int) string {
	return fmt.Sprintf(`{
  "version": 2,
  "mode": "nat",
  "ports": [
    {"name": "lan", "interface": "p1", "role": "lan", "addresses": ["10.60.0.1/24"], "mtu": 2000},
    {"name": "wan", "interface": "p2", "role": "wan", "addresses": ["10.61.0.2/24"], "mtu": 1500}
  ],
  "hostPort": {"interface": "e1khost0", "addresses": ["10.60.0.2/24"]},
  "nat": {
    "gateway": "10.61.0.1",
    "conntrack": {"size": %d, "timeouts": {"udp": "2s", "udpStream": "3s"}},
    "forwards": [
      {"proto": "tcp", "wanPorts": "8081", "lanHost": "10.60.0.10", "lanPort": 8080},
      {"proto": "udp", "wanPorts": "8082", "lanHost": "10.60.0.10", "lanPort": 8082}
    ]
  }
}
`, conntrackSize)
}

// newNATLab builds the namespaces and starts the appliance with a
// conntrack table of size entries (and the extra flags).
func newNATLab(t *testing.T, size int, flags ...string) *lab {
	return natLab{config: natConfigJSON(size), flags: flags}.build(t)
}

// natLab is a NAT lab to build: the box's runtime config, its extra
// flags, and whether the WAN is a segment with an attacker on it.
type natLab struct {
	config     string
	flags      []string
	wanSegment bool
}

// build makes the namespaces and starts the appliance.
func (spec natLab) build(t *testing.T) *lab {
	requireNetns(t)
	testenv.Require(t, "traceroute")
	l := &lab{t: t, dir: t.TempDir()}
	prefixes := []string{"e1knb", "e1knl", "e1kng", "e1kni"}
	if spec.wanSegment {
		prefixes = append(prefixes, "e1kna")
	}
	for i, prefix := range prefixes {
		ns := netnstest.New(t, prefix)
		ns.IP(t, "link", "set", "lo", "up")
		if i == 0 {
			l.box = ns
		} else {
			l.hosts = append(l.hosts, ns)
		}
	}
	lan, gw, inet := l.hosts[0], l.hosts[1], l.hosts[2]
	lanEnd := natEnd(lan, "eth0", natLANHost+"/24")
	lanEnd.MTU = 2000
	netnstest.Veth(t, natEnd(l.box, "p1"), lanEnd)
	if spec.wanSegment {
		seg := netnstest.New(t, "e1kns")
		seg.IP(t, "link", "add", "br0", "type", "bridge", "stp_state", "0")
		netnstest.Veth(t, natEnd(l.box, "p2"), natEnd(seg, "sbox"))
		netnstest.Veth(t, natEnd(gw, "eth0", natGateway+"/24"), natEnd(seg, "sgw"))
		netnstest.Veth(t, natEnd(l.hosts[nsAtk-1], "eth0", natAttacker+"/24"), natEnd(seg, "satk"))
		for _, p := range []string{"sbox", "sgw", "satk"} {
			seg.IP(t, "link", "set", p, "master", "br0")
		}
		seg.IP(t, "link", "set", "br0", "up")
	} else {
		netnstest.Veth(t, natEnd(l.box, "p2"), natEnd(gw, "eth0", natGateway+"/24"))
	}
	netnstest.Veth(t, natEnd(gw, "eth1", "10.62.0.1/24"), natEnd(inet, "eth0", natServer+"/24"))
	lan.IP(t, "route", "add", "default", "via", natRouter)
	gw.Sysctl(t, "net.ipv4.ip_forward=1")
	inet.IP(t, "route", "add", "default", "via", "10.62.0.1")

	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(spec.config), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start(append([]string{"-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json")}, spec.flags...)...)
	return l
}

// natEnd is a veth end of the NAT lab, up, with the given addresses and
// no offloads: frames must reach the rings whole, with checksums.
func natEnd(ns *netnstest.Namespace, dev string, addrs ...string) netnstest.End {
	return netnstest.End{NS: ns, Name: dev, Off: []string{"gro", "gso", "tso", "tx", "rx"}, Addrs: addrs, Up: true}
}

// helper starts this test binary as helper mode in namespace ns.
func (l *lab) helper(t *testing.T, ns int, mode string, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	return helperIn(t, l.hosts[ns-1], mode, args...)
}

// helperIn starts this test binary as helper mode in namespace ns.
func helperIn(t *testing.T, ns *netnstest.Namespace, mode string, args ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := ns.Command(append([]string{self}, args...)...)
	cmd.Env = append(os.Environ(), "E1KBOX_NAT_HELPER="+mode)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	netnstest.Start(t, cmd)
	t.Cleanup(func() { in.Close() }) // before the kill
	return cmd, in, bufio.NewReader(out)
}

// line reads one line of a helper's output, failing after d.
func line(t *testing.T, r *bufio.Reader, d time.Duration) string {
	t.Helper()
	c := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		c <- strings.TrimSpace(s)
	}()
	select {
	case s := <-c:
		return s
	case <-time.After(d):
		t.Fatalf("helper said nothing for %v", d)
		return ""
	}
}

// serve runs the HTTP and TCP echo servers in namespace ns; the HTTP
// server logs the remote address of every request to the returned file.
func (l *lab) serve(t *testing.T, ns int, name string) string {
	t.Helper()
	log := filepath.Join(l.dir, name+".log")
	_, _, out := l.helper(t, ns, "serve", ":8080", ":7", log)
	if s := line(t, out, 5*time.Second); s != "serving" {
		t.Fatalf("server: %q", s)
	}
	return log
}

func (l *lab) conntrack(t *testing.T, query string) dataplane.ConnPage {
	t.Helper()
	code, body := l.boxGet("/api/conntrack?" + query)
	var wp webui.ConnPage
	if code != 200 {
		t.Fatalf("/api/conntrack?%s: %d %s", query, code, body)
	}
	if err := json.Unmarshal([]byte(body), &wp); err != nil {
		t.Fatalf("/api/conntrack: %v\n%s", err, body)
	}
	// The dashboard lists a connection by its original direction and
	// the translated addresses: the reply direction follows from them.
	p := dataplane.ConnPage{Total: wp.Total}
	for _, c := range wp.Entries {
		dc := dataplane.Conn{ID: c.ID, Proto: c.Proto, Kind: c.Kind, State: c.State,
			Orig: dataplane.ConnTuple{Src: c.Src, Dst: c.Dst}, Reply: dataplane.ConnTuple{Src: c.Dst, Dst: c.Src}}
		if c.NATSrc.IsValid() {
			dc.Reply.Dst = c.NATSrc
		}
		if c.NATDst.IsValid() {
			dc.Reply.Src = c.NATDst
		}
		p.Conns = append(p.Conns, dc)
	}
	return p
}

// boxSysctl reads a sysctl in the box namespace.
func (l *lab) boxSysctl(t *testing.T, key string) string {
	t.Helper()
	return strings.TrimSpace(l.box.Run(t, "sysctl", "-n", key))
}

// isRSTFrom matches an IPv4 TCP segment with RST set from src.
func isRSTFrom(src net.IP) func(afpacket.Packet) bool {
	return func(p afpacket.Packet) bool {
		d := p.Data
		if len(d) < 14+20+20 || binary.BigEndian.Uint16(d[12:]) != 0x0800 || d[14+9] != 6 {
			return false
		}
		ihl := int(d[14]&0xf) * 4
		return net.IP(d[14+12:14+16]).Equal(src) && len(d) >= 14+ihl+14 && d[14+ihl+13]&0x04 != 0
	}
}

func TestNATRouter(t *testing.T) {
	l := newNATLab(t, 65536)
	lanLog := l.serve(t, nsLAN, "lan")
	inetLog := l.serve(t, nsInet, "inet")

	t.Run("healthz and mode", func(t *testing.T) {
		s := l.stats(t)
		if s.Mode != dataplane.ModeNAT || s.NAT == nil || s.NAT.MaxConns != 65536 {
			t.Fatalf("stats: mode %q nat %+v", s.Mode, s.NAT)
		}
	})

	t.Run("kernel stays quiet on the data ports", func(t *testing.T) {
		for _, p := range []string{"p1", "p2"} {
			for key, want := range map[string]string{"arp_ignore": "8", "rp_filter": "1", "forwarding": "0"} {
				if got := l.boxSysctl(t, "net.ipv4.conf."+p+"."+key); got != want {
					t.Errorf("%s %s = %s, want %s", p, key, got, want)
				}
			}
			if out := l.box.IP(t, "-4", "addr", "show", "dev", p); strings.Contains(out, "inet ") {
				t.Errorf("%s has a kernel address:\n%s", p, out)
			}
		}
	})

	t.Run("ping through, to the router and to the box", func(t *testing.T) {
		l.mustHost(t, nsLAN, "ping", "-c", "3", "-i", "0.2", "-W", "2", natServer)
		l.mustHost(t, nsLAN, "ping", "-c", "2", "-i", "0.2", "-W", "2", natRouter)
		l.mustHost(t, nsGW, "ping", "-c", "2", "-i", "0.2", "-W", "2", natWANAddr)
		l.mustHost(t, nsLAN, "ping", "-c", "2", "-i", "0.2", "-W", "2", natBoxHost)
		// The LAN host reaches the router and the box's own stack behind
		// it at the router's MAC (p1's): the host port has it in NAT mode.
		router := l.mustHost(t, nsLAN, "ip", "neigh", "show", natRouter)
		box := l.mustHost(t, nsLAN, "ip", "neigh", "show", natBoxHost)
		p1 := strings.TrimSpace(l.box.Run(t, "cat", "/sys/class/net/p1/address"))
		if !strings.Contains(router, p1) || !strings.Contains(box, p1) {
			t.Errorf("LAN host neighbours: router %q, box %q (p1 is %s)", router, box, p1)
		}
		if out, err := l.host(nsLAN, "curl", "-s", "--max-time", "3", "http://"+natBoxHost+":8080/healthz"); err != nil || !strings.Contains(out, `"status":"ok"`) {
			t.Errorf("dashboard through the host port: %v %s", err, out)
		}
	})

	t.Run("curl masqueraded to the box's WAN address", func(t *testing.T) {
		out := l.mustHost(t, nsLAN, "curl", "-s", "--max-time", "5", "http://"+natServer+":8080/")
		if !strings.HasPrefix(out, natWANAddr+":") {
			t.Errorf("server saw the client as %q, want %s:port", out, natWANAddr)
		}
		b, _ := os.ReadFile(inetLog)
		for _, ln := range strings.Fields(string(b)) {
			if !strings.HasPrefix(ln, natWANAddr+":") {
				t.Errorf("server log has a request from %s, want only %s", ln, natWANAddr)
			}
		}
		p := l.conntrack(t, "proto=tcp&addr="+natServer+"&port=8080")
		if p.Total == 0 || p.Conns[0].Kind != "masquerade" || p.Conns[0].Reply.Dst.Addr().String() != natWANAddr {
			t.Errorf("conntrack after curl: %+v", p)
		}
	})

	t.Run("port forward from the WAN, no kernel RST", func(t *testing.T) {
		rsts := l.capture(t, nsGW)
		out := l.mustHost(t, nsInet, "curl", "-s", "--max-time", "5", "http://"+natWANAddr+":8081/")
		if !strings.HasPrefix(out, natServer+":") {
			t.Errorf("LAN server saw the forwarded client as %q, want %s:port", out, natServer)
		}
		b, _ := os.ReadFile(lanLog)
		if !strings.Contains(string(b), natServer+":") {
			t.Errorf("LAN server log: %q", b)
		}
		// A port nobody forwards: the router drops the SYN, and the
		// kernel, which sees every frame of p2, must not answer either.
		before := l.stats(t).Drops[dataplane.DropNATHost]
		_, err := l.host(nsInet, "curl", "-s", "--connect-timeout", "1", "http://"+natWANAddr+":22/")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 28 {
			t.Errorf("curl to an unforwarded WAN port: %v, want a timeout (28), not a refusal", err)
		}
		if d := l.stats(t).Drops[dataplane.DropNATHost] - before; d == 0 {
			t.Errorf("SYN to an unforwarded port not counted as nat_host")
		}
		if n := rsts(500*time.Millisecond, isRSTFrom(net.ParseIP(natWANAddr))); n != 0 {
			t.Errorf("%d TCP RSTs from %s on the WAN", n, natWANAddr)
		}
		p := l.conntrack(t, "kind=forward")
		if p.Total == 0 || p.Conns[0].Orig.Dst.String() != natWANAddr+":8081" || p.Conns[0].Reply.Src.String() != natLANHost+":8080" {
			t.Errorf("forward in conntrack: %+v", p)
		}
	})

	t.Run("iperf3 TCP and UDP both directions", func(t *testing.T) {
		pidfile := filepath.Join(l.dir, "iperf3.pid")
		l.mustHost(t, nsInet, "iperf3", "-s", "-D", "--pidfile", pidfile)
		defer killPidfile(pidfile)
		type result struct {
			End struct {
				SumReceived struct {
					Bytes         float64
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
				Sum struct {
					Packets     float64
					LostPercent float64 `json:"lost_percent"`
				}
			}
		}
		for _, tc := range []struct {
			name string
			args []string
		}{
			{"TCP upload", nil},
			{"TCP download", []string{"-R"}},
			{"UDP upload", []string{"-u", "-b", "20M"}},
			{"UDP download", []string{"-u", "-b", "20M", "-R"}},
		} {
			var res result
			eventually(t, 3*time.Second, "iperf3 "+tc.name, func() (bool, string) {
				out, err := l.host(nsLAN, append([]string{"iperf3", "-c", natServer, "-t", "2", "-J"}, tc.args...)...)
				if err != nil {
					return false, out
				}
				return json.Unmarshal([]byte(out), &res) == nil, out
			})
			if strings.HasPrefix(tc.name, "TCP") {
				if res.End.SumReceived.Bytes < 1e6 {
					t.Errorf("%s: %.0f bytes", tc.name, res.End.SumReceived.Bytes)
				}
				t.Logf("%s through NAT: %.1f Mbit/s", tc.name, res.End.SumReceived.BitsPerSecond/1e6)
			} else {
				// Loss end to end depends on the receiver getting CPU on a
				// shared machine; the datagrams must mostly arrive.
				if res.End.Sum.Packets < 100 || res.End.Sum.LostPercent > 90 {
					t.Errorf("%s: %.0f datagrams, %.1f%% lost", tc.name, res.End.Sum.Packets, res.End.Sum.LostPercent)
				}
				t.Logf("%s through NAT: %.0f datagrams, %.2f%% lost", tc.name, res.End.Sum.Packets, res.End.Sum.LostPercent)
			}
		}
	})

	t.Run("500 concurrent connections", func(t *testing.T) {
		const n = 500
		cmd, in, out := l.helper(t, nsLAN, "conns", natServer+":8080", fmt.Sprint(n))
		if s := line(t, out, 30*time.Second); s != fmt.Sprintf("dialed %d", n) {
			t.Fatalf("client: %q", s)
		}
		// All of them are open at once: the router tracks them all.
		if p := l.conntrack(t, "proto=tcp&state=established&addr="+natServer+"&port=8080&limit=1"); p.Total < n {
			t.Errorf("%d established connections to the server tracked, want ≥ %d", p.Total, n)
		}
		fmt.Fprintln(in, "go")
		var res struct {
			OK      int
			Remotes map[string]int
			Errors  []string
		}
		if err := json.Unmarshal([]byte(line(t, out, 30*time.Second)), &res); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if res.OK != n || len(res.Remotes) != 1 || res.Remotes[natWANAddr] != n {
			t.Errorf("%d of %d requests completed, server saw %v; errors %v", res.OK, n, res.Remotes, res.Errors)
		}
	})

	t.Run("traceroute answers TTL exceeded", func(t *testing.T) {
		// One probe per hop; a probe lost to some ICMP rate limit shows
		// as "*", so try a few times.
		want := fmt.Sprint([]string{natRouter, natGateway, natServer})
		eventually(t, 15*time.Second, "traceroute through the box", func() (bool, string) {
			out := l.mustHost(t, nsLAN, "traceroute", "-n", "-q", "1", "-w", "2", "-m", "5", natServer)
			var hops []string
			for _, ln := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
				if f := strings.Fields(ln); len(f) >= 2 {
					hops = append(hops, f[1])
				}
			}
			return fmt.Sprint(hops) == want, out
		})
	})

	t.Run("fragmentation needed", func(t *testing.T) {
		before := l.stats(t)
		out, err := l.host(nsLAN, "ping", "-c", "2", "-i", "0.3", "-W", "1", "-M", "do", "-s", "1600", natServer)
		if err == nil || !(strings.Contains(out, "mtu = 1500") || strings.Contains(out, "mtu=1500")) {
			t.Errorf("ping -M do -s 1600: %v\n%s", err, out)
		}
		after := l.stats(t)
		if after.NAT.ICMPErrors == before.NAT.ICMPErrors || after.Drops[dataplane.NATDrop(nat.ReasonTooBig)] == before.Drops[dataplane.NATDrop(nat.ReasonTooBig)] {
			t.Errorf("no fragmentation needed counted: icmpErrors %d→%d", before.NAT.ICMPErrors, after.NAT.ICMPErrors)
		}
		// What fits the WAN still passes.
		l.mustHost(t, nsLAN, "ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1400", natServer)
	})

	t.Run("UDP flow expires after its timeout", func(t *testing.T) {
		_, _, out := l.helper(t, nsLAN, "udp", natServer+":9999", "45678", "1")
		if s := line(t, out, 5*time.Second); s != "sent 1" {
			t.Fatalf("udp helper: %q", s)
		}
		start := time.Now()
		if p := l.conntrack(t, "proto=udp&port=45678"); p.Total != 1 || p.Conns[0].State != "unreplied" {
			t.Fatalf("UDP flow not tracked: %+v", p)
		}
		eventually(t, 5*time.Second, "UDP flow gone", func() (bool, string) {
			p := l.conntrack(t, "proto=udp&port=45678")
			return p.Total == 0, fmt.Sprint(p)
		})
		if d := time.Since(start); d < time.Second {
			t.Errorf("a flow with a 2 s timeout went after %v", d)
		}
	})

	t.Run("delete a connection through the API", func(t *testing.T) {
		p := l.conntrack(t, "kind=forward&limit=1")
		if len(p.Conns) == 0 {
			t.Fatalf("no forward connection left: %+v", p)
		}
		out, err := l.box.Command("curl", "-s", "-X", "DELETE", "-u", "gokrazy:"+testPassword, "-H", "X-E1kbox-CSRF: 1", "-w", "\n%{http_code}",
			fmt.Sprintf("http://127.0.0.1:8080/api/conntrack/%d", p.Conns[0].ID)).Output()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "204") {
			t.Fatalf("DELETE: %v %s", err, out)
		}
		if q := l.conntrack(t, "kind=forward"); q.Total != p.Total-1 {
			t.Errorf("after DELETE: %d forward connections, want %d", q.Total, p.Total-1)
		}
		if code, body := l.boxGet("/api/neighbours"); code != 200 || !strings.Contains(body, natGateway) || !strings.Contains(body, natLANHost) {
			t.Errorf("/api/neighbours: %d %s", code, body)
		}
	})

	t.Run("drops by reason", func(t *testing.T) {
		s := l.stats(t)
		if s.Drops[dataplane.NATDrop(nat.ReasonTableFull)] != 0 || s.NAT.Evicted != 0 {
			t.Errorf("a big table evicted or overflowed: %+v", s.NAT)
		}
		b, _ := json.Marshal(s.Drops)
		t.Logf("drops: %s", b)
	})

	if d := l.stop(); d > 5*time.Second {
		t.Errorf("SIGTERM took %v", d)
	}
}

// TestNATTableFull runs the router with the smallest table (256): a flood
// of unreplied UDP flows evicts unreplied entries only, and established
// TCP connections keep working.
func TestNATTableFull(t *testing.T) {
	l := newNATLab(t, 256)
	l.serve(t, nsInet, "inet")
	const held = 20
	cmd, in, out := l.helper(t, nsLAN, "hold", natServer+":7", fmt.Sprint(held))
	if s := line(t, out, 20*time.Second); s != fmt.Sprintf("ready %d", held) {
		t.Fatalf("hold: %q", s)
	}
	_, _, uout := l.helper(t, nsLAN, "udp", natServer+":9999", "30000", "600")
	if s := line(t, uout, 30*time.Second); s != "sent 600" {
		t.Fatalf("udp: %q", s)
	}
	time.Sleep(200 * time.Millisecond)
	s := l.stats(t)
	if s.NAT.Evicted == 0 || s.NAT.Conns > 256 {
		t.Errorf("after 600 new flows in a table of 256: %+v", s.NAT)
	}
	t.Logf("table of 256 after %d TCP and 600 UDP connections: %d live, %d evicted, %d new", held, s.NAT.Conns, s.NAT.Evicted, s.NAT.NewConns)
	if n := s.Drops[dataplane.NATDrop(nat.ReasonTableFull)]; n != 0 {
		t.Errorf("%d table_full drops while unreplied entries could go", n)
	}
	if p := l.conntrack(t, "proto=tcp&state=established&port=7"); p.Total != held {
		t.Errorf("%d established connections left, want %d", p.Total, held)
	}
	fmt.Fprintln(in, "go")
	var res struct{ OK int }
	if err := json.Unmarshal([]byte(line(t, out, 20*time.Second)), &res); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if res.OK != held {
		t.Errorf("%d of %d established connections still work", res.OK, held)
	}
	l.stop()
}

// natHelper runs a helper program in a namespace (this test binary,
// started by lab.helper) and returns the exit code.
func natHelper(mode string, args []string) int {
	var err error
	switch mode {
	case "serve":
		err = helperServe(args[0], args[1], args[2])
	case "conns":
		err = helperConns(args[0], args[1])
	case "hold":
		err = helperHold(args[0], args[1])
	case "udp":
		err = helperUDP(args[0], args[1], args[2])
	case "udpecho":
		err = helperUDPEcho(args[0])
	case "udpc":
		err = helperUDPClient(args[0])
	case "paced":
		err = helperPaced(args[0], args[1], args[2])
	case "conn":
		err = helperConn(args[0])
	default:
		err = fmt.Errorf("unknown helper %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func init() {
	if mode := os.Getenv("E1KBOX_NAT_HELPER"); mode != "" {
		os.Exit(natHelper(mode, os.Args[1:]))
	}
}

// helperServe answers HTTP with the client's address (and logs it) and
// echoes lines on a TCP port, until stdin closes.
func helperServe(httpAddr, echoAddr, logPath string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	el, err := net.Listen("tcp", echoAddr)
	if err != nil {
		return err
	}
	go http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Fprintln(logf, r.RemoteAddr)
		mu.Unlock()
		io.WriteString(w, r.RemoteAddr)
	}))
	go func() {
		for {
			c, err := el.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	fmt.Println("serving")
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// helperConns opens n connections to addr at once, says "dialed n", waits
// for a line on stdin, then makes one HTTP/1.0 request on each and prints
// how many completed and the client addresses the server reported.
func helperConns(addr, count string) error {
	var n int
	fmt.Sscan(count, &n)
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 15*time.Second)
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	dialed := 0
	for _, c := range conns {
		if c != nil {
			dialed++
		}
	}
	fmt.Printf("dialed %d\n", dialed)
	bufio.NewReader(os.Stdin).ReadString('\n')
	res := struct {
		OK      int
		Remotes map[string]int
		Errors  []string
	}{Remotes: map[string]int{}}
	for _, c := range conns {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			c.SetDeadline(time.Now().Add(15 * time.Second))
			_, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
			var body []byte
			if err == nil {
				var resp *http.Response
				if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					body, err = io.ReadAll(resp.Body)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			res.OK++
			host, _, _ := net.SplitHostPort(string(body))
			res.Remotes[host]++
		}()
	}
	wg.Wait()
	res.Errors = errs[:min(len(errs), 5)]
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// helperHold opens n echo connections, checks a line on each, says
// "ready n", waits for a line on stdin, checks another line on each and
// prints how many still worked.
func helperHold(addr, count string) error {
	var n int
	fmt.Sscan(count, &n)
	type conn struct {
		c net.Conn
		r *bufio.Reader
	}
	var conns []conn
	echo := func(c conn, msg string) bool {
		c.c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c.c, msg+"\n"); err != nil {
			return false
		}
		s, err := c.r.ReadString('\n')
		return err == nil && s == msg+"\n"
	}
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		cc := conn{c, bufio.NewReader(c)}
		if !echo(cc, fmt.Sprint("hello ", i)) {
			return fmt.Errorf("connection %d: no echo", i)
		}
		conns = append(conns, cc)
	}
	fmt.Printf("ready %d\n", len(conns))
	bufio.NewReader(os.Stdin).ReadString('\n')
	ok := 0
	for i, c := range conns {
		if echo(c, fmt.Sprint("again ", i)) {
			ok++
		}
		c.c.Close()
	}
	fmt.Printf("{\"OK\": %d}\n", ok)
	return nil
}

// helperUDP sends one datagram to addr from each of n source ports
// starting at first, and says "sent n".
func helperUDP(addr, first, count string) error {
	var port, n int
	fmt.Sscan(first, &port)
	fmt.Sscan(count, &n)
	dst, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return err
	}
	for i := range n {
		c, err := net.ListenUDP("udp", &net.UDPAddr{Port: port + i})
		if err != nil {
			return err
		}
		if _, err := c.WriteTo([]byte("ping"), dst); err != nil {
			c.Close()
			return err
		}
		c.Close()
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond) // stay under the router's rates
		}
	}
	fmt.Printf("sent %d\n", n)
	return nil
}
