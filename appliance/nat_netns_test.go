package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/nat"
)

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
