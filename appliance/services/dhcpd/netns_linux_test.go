package dhcpd

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/internal/testenv"
)

// The netns tests run the Server on a bridge in one namespace ("the
// router") and real Debian DHCP clients (isc-dhcp-client's dhclient and
// busybox's udhcpc) each in its own namespace, wired to the bridge by a
// veth pair. Nothing leaves the namespaces the tests create.

func requireNetns(t *testing.T) {
	testenv.Require(t, "root", "ip", "ss", "dhclient", "udhcpc")
}

var nsSeq atomic.Int64

// netns is a network namespace made for one test and deleted after it,
// with the processes still in it.
type netns struct{ name string }

func newNetns(t *testing.T, prefix string) *netns {
	t.Helper()
	ns := &netns{name: fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), nsSeq.Add(1))}
	if out, err := exec.Command("ip", "netns", "add", ns.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", ns.name, err, out)
	}
	t.Cleanup(func() {
		out, _ := exec.Command("ip", "netns", "pids", ns.name).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL) // a client this test started and lost track of
			}
		}
		if out, err := exec.Command("ip", "netns", "del", ns.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns.name, err, out)
		}
	})
	return ns
}

// cmd is args run inside the namespace.
func (ns *netns) cmd(args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.name}, args...)...)
}

// run runs args inside the namespace, failing the test if they fail.
func (ns *netns) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := ns.cmd(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %v\n%s", ns.name, args, err, out)
	}
	return string(out)
}

// serve runs s.Serve in the namespace: on a goroutine whose OS thread
// entered it (and is never unlocked, so it ends with the goroutine). It
// returns once port 67 is bound; stop ends Serve (also at cleanup).
func (ns *netns) serve(t *testing.T, s *Server) (stop func()) {
	t.Helper()
	f, err := os.Open("/run/netns/" + ns.name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- s.Serve(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("Serve: %v", err)
			}
			f.Close()
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := ns.cmd("ss", "-Huln", "sport", "=", ":67").Output()
		if len(bytes.TrimSpace(out)) > 0 {
			return stop
		}
		select {
		case err := <-errc:
			t.Fatalf("Serve ended at once: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("Serve did not bind port 67 within 5 s")
		}
	}
}

// testLAN is the router namespace with br0 (10.70.0.1/24) and its clients.
type testLAN struct {
	router  *netns
	dir     string // scripts, configs, lease and event files
	clients int
}

func newLAN(t *testing.T) *testLAN {
	requireNetns(t)
	l := &testLAN{router: newNetns(t, "dhcpd-r"), dir: t.TempDir()}
	l.router.run(t, "ip", "link", "add", "br0", "type", "bridge", "forward_delay", "0")
	l.router.run(t, "ip", "addr", "add", "10.70.0.1/24", "dev", "br0")
	l.router.run(t, "ip", "link", "set", "br0", "up")
	return l
}

// recordScript is the clients' script (after a line setting EVENTS: dhclient
// clears the environment): it appends one line per call to $EVENTS and
// configures the client's interface the way the distribution's
// scripts would (inside the client's namespace only; no resolv.conf).
const recordScript = `if [ -n "$reason" ]; then
	ev=$reason a=$new_ip_address m=$new_subnet_mask
	echo "event=$reason|ip=$new_ip_address|mask=$new_subnet_mask|router=$new_routers|dns=$new_domain_name_servers|domain=$new_domain_name|ntp=$new_ntp_servers|mtu=$new_interface_mtu|lease=$new_dhcp_lease_time|server=$new_dhcp_server_identifier" >>"$EVENTS"
else
	ev=$1 a=$ip m=$mask
	echo "event=$1|ip=$ip|mask=$subnet|router=$router|dns=$dns|domain=$domain|ntp=$ntpsrv|mtu=$mtu|lease=$lease|server=$serverid" >>"$EVENTS"
fi
case $ev in
BOUND|RENEW|REBIND|REBOOT|bound|renew)
	ip addr flush dev "$interface"
	ip addr add "$a/$m" dev "$interface" ;;
RELEASE|EXPIRE|STOP|FAIL|deconfig|nak|leasefail)
	ip addr flush dev "$interface" ;;
esac
exit 0
`

// lanClient is a namespace with interface c0 (MAC mac) on the LAN's bridge.
type lanClient struct {
	ns     *netns
	mac    string
	events string // the script's event file
	script string
	lan    *testLAN
	name   string
}

func (l *testLAN) client(t *testing.T, mac string) *lanClient {
	t.Helper()
	l.clients++
	c := &lanClient{ns: newNetns(t, "dhcpd-c"), mac: mac, lan: l, name: fmt.Sprintf("c%d", l.clients)}
	c.events = filepath.Join(l.dir, c.name+".events")
	c.script = filepath.Join(l.dir, c.name+".sh")
	if err := os.WriteFile(c.script, []byte("#!/bin/sh\nEVENTS="+c.events+"\n"+recordScript), 0o755); err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprintf("p%d", l.clients)
	c.ns.run(t, "ip", "link", "add", "c0", "address", mac, "type", "veth", "peer", "name", port, "netns", l.router.name)
	l.router.run(t, "ip", "link", "set", port, "master", "br0", "up")
	c.ns.run(t, "ip", "link", "set", "lo", "up")
	c.ns.run(t, "ip", "link", "set", "c0", "up")
	// A client's first DISCOVER must not be lost to a link coming up:
	// wait for the carrier and the bridge port forwarding.
	deadline := time.Now().Add(5 * time.Second)
	for {
		up := strings.Contains(c.ns.run(t, "ip", "link", "show", "c0"), "state UP")
		fwd := strings.Contains(l.router.run(t, "ip", "-d", "link", "show", port), "state forwarding")
		if up && fwd {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: link not up and forwarding within 5 s", c.name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start starts a client program in the namespace; it is killed at cleanup.
func (c *lanClient) start(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := c.ns.cmd(args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() || testing.Verbose() {
			t.Logf("%s %s output:\n%s", c.name, args[0], out.String())
		}
	})
	return cmd
}

// runOnce runs a client program to its end.
func (c *lanClient) runOnce(t *testing.T, args ...string) string {
	t.Helper()
	cmd := c.ns.cmd(args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %v\n%s", c.name, args, err, out)
	}
	return string(out)
}

// dhclient starts isc-dhcp-client in the foreground with its own config,
// lease and pid files.
func (c *lanClient) dhclient(t *testing.T, extra ...string) *exec.Cmd {
	t.Helper()
	return c.start(t, append([]string{"dhclient", "-4", "-d", "-v"}, append(c.dhclientFiles(t), extra...)...)...)
}

func (c *lanClient) dhclientFiles(t *testing.T) []string {
	cf := filepath.Join(c.lan.dir, c.name+".dhclient.conf")
	if _, err := os.Stat(cf); err != nil {
		conf := "send host-name \"" + c.name + "-dhclient\";\n" +
			"request subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, ntp-servers, interface-mtu;\n"
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"-cf", cf, "-sf", c.script,
		"-pf", filepath.Join(c.lan.dir, c.name+".pid"), "-lf", filepath.Join(c.lan.dir, c.name+".leases"), "c0"}
}

// udhcpc starts busybox's udhcpc in the foreground.
func (c *lanClient) udhcpc(t *testing.T, extra ...string) *exec.Cmd {
	t.Helper()
	return c.start(t, append([]string{"udhcpc", "-f", "-i", "c0", "-s", c.script, "-t", "20", "-T", "1",
		"-x", "hostname:" + c.name + "-udhcpc"}, extra...)...)
}

type event map[string]string

// waitEvent waits for the first event, from the n-th on, whose kind is one
// of kinds, and returns it with its index.
func (c *lanClient) waitEvent(t *testing.T, from int, kinds ...string) (event, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(c.events)
		for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if i < from || line == "" {
				continue
			}
			ev := event{}
			for _, kv := range strings.Split(line, "|") {
				k, v, _ := strings.Cut(kv, "=")
				ev[k] = v
			}
			for _, k := range kinds {
				if ev["event"] == k {
					return ev, i
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(c.events)
	t.Fatalf("%s: no %v event within 30 s; events:\n%s", c.name, kinds, b)
	return nil, 0
}

// waitLease waits until the server has a lease for mac in state st and
// returns it.
func waitLease(t *testing.T, s *Server, mac string, st State) Lease {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, l := range s.Leases() {
			if l.MAC.String() == mac && l.State == st {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s lease for %s; leases: %v", st, mac, leaseLines(s))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func netnsConfig(t *testing.T) Config {
	return Config{
		Interface: "br0", ServerIP: srvIP, Subnet: lan,
		PoolStart: netip.MustParseAddr("10.70.0.100"), PoolEnd: netip.MustParseAddr("10.70.0.199"),
		LeaseTime: time.Hour, Domain: "home.arpa", NTP: []netip.Addr{srvIP}, MTU: 1400,
		Static:    []Static{{MAC: hw("02:dc:00:00:00:05"), IP: netip.MustParseAddr("10.70.0.50"), Hostname: "printer"}},
		Exclude:   []netip.Addr{netip.MustParseAddr("10.70.0.100")},
		LeaseFile: filepath.Join(t.TempDir(), "leases.json"),
	}
}

// checkOptions checks a client's view of the configured options.
func checkOptions(t *testing.T, who string, ev event, wantIP string) {
	t.Helper()
	want := event{"router": "10.70.0.1", "dns": "10.70.0.1", "domain": "home.arpa", "ntp": "10.70.0.1",
		"mtu": "1400", "lease": "3600", "server": "10.70.0.1", "mask": "255.255.255.0"}
	for k, v := range want {
		if ev[k] != v {
			t.Errorf("%s: %s = %q, want %q (event %v)", who, k, ev[k], v, ev)
		}
	}
	if wantIP != "" && ev["ip"] != wantIP {
		t.Errorf("%s: address %s, want %s", who, ev["ip"], wantIP)
	}
	a, err := netip.ParseAddr(ev["ip"])
	if err != nil {
		t.Errorf("%s: address %q: %v", who, ev["ip"], err)
	}
	if wantIP == "" && (a.Less(netip.MustParseAddr("10.70.0.101")) || netip.MustParseAddr("10.70.0.199").Less(a)) {
		t.Errorf("%s: address %v outside the pool 10.70.0.101-199", who, a)
	}
}

// TestNetnsClients: dhclient and udhcpc get addresses from the pool with
// the configured options, a static lease goes to its MAC, and a dhclient -r
// RELEASE frees the address for another client.
func TestNetnsClients(t *testing.T) {
	l := newLAN(t)
	s, err := New(netnsConfig(t), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	l.router.serve(t, s)
	if err := s.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Errorf("a second Serve: %v, want an error", err)
	}

	dh := l.client(t, "02:dc:00:00:00:01")
	dh.dhclient(t)
	ud := l.client(t, "02:dc:00:00:00:02")
	ud.udhcpc(t)
	st := l.client(t, "02:dc:00:00:00:05")
	st.udhcpc(t)

	dhEv, _ := dh.waitEvent(t, 0, "BOUND")
	checkOptions(t, "dhclient", dhEv, "")
	udEv, _ := ud.waitEvent(t, 0, "bound")
	checkOptions(t, "udhcpc", udEv, "")
	stEv, _ := st.waitEvent(t, 0, "bound")
	checkOptions(t, "udhcpc with a static lease", stEv, "10.70.0.50")
	if dhEv["ip"] == udEv["ip"] {
		t.Errorf("dhclient and udhcpc both got %s", dhEv["ip"])
	}

	dhLease := waitLease(t, s, dh.mac, StateBound)
	if dhLease.IP.String() != dhEv["ip"] || dhLease.Hostname != "c1-dhclient" {
		t.Errorf("server's lease for dhclient: %+v, client has %s", dhLease, dhEv["ip"])
	}
	if l := waitLease(t, s, ud.mac, StateBound); l.IP.String() != udEv["ip"] || l.Hostname != "c2-udhcpc" || l.ClientID != "0102dc00000002" {
		t.Errorf("server's lease for udhcpc: %+v, client has %s", l, udEv["ip"])
	}
	if l := waitLease(t, s, st.mac, StateBound); !l.Static || l.Hostname != "printer" {
		t.Errorf("server's lease for the static device: %+v", l)
	}
	if a, ok := s.Lookup("c2-udhcpc.home.arpa."); !ok || a.String() != udEv["ip"] {
		t.Errorf("Lookup(c2-udhcpc) = %v, %v", a, ok)
	}

	// dhclient -r stops the running dhclient and sends a RELEASE.
	dh.runOnce(t, append([]string{"dhclient", "-4", "-r", "-v"}, dh.dhclientFiles(t)...)...)
	waitLease(t, s, dh.mac, StateReleased)

	// The released address goes to the next client that asks for it.
	next := l.client(t, "02:dc:00:00:00:03")
	next.udhcpc(t, "-r", dhEv["ip"])
	nextEv, _ := next.waitEvent(t, 0, "bound")
	checkOptions(t, "udhcpc asking for the released address", nextEv, dhEv["ip"])
	if got := s.Stats(); got.Acks < 4 || got.Releases != 1 {
		t.Errorf("stats %+v: want 4 ACKs and a RELEASE at least", got)
	}
}

// TestNetnsRestart: leases survive a restart of the server: a udhcpc
// renewing (SIGUSR1, unicast RENEWING) and a dhclient restarting
// (INIT-REBOOT from its lease file) keep their addresses with the new
// server, which knew them from the lease file before they spoke.
func TestNetnsRestart(t *testing.T) {
	l := newLAN(t)
	cfg := netnsConfig(t)
	s1, err := New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	stop1 := l.router.serve(t, s1)
	ud := l.client(t, "02:dc:00:00:00:11")
	udProc := ud.udhcpc(t)
	dh := l.client(t, "02:dc:00:00:00:12")
	dhProc := dh.dhclient(t)
	udEv, udN := ud.waitEvent(t, 0, "bound")
	dhEv, _ := dh.waitEvent(t, 0, "BOUND")
	waitLease(t, s1, ud.mac, StateBound)
	waitLease(t, s1, dh.mac, StateBound)
	stop1()

	// dhclient goes away without a RELEASE while the server is down.
	dhProc.Process.Signal(syscall.SIGKILL)
	time.Sleep(100 * time.Millisecond)

	s2, err := New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	var known []string
	for _, le := range s2.Leases() {
		if le.State == StateBound {
			known = append(known, le.MAC.String()+" "+le.IP.String())
		}
	}
	want := []string{ud.mac + " " + udEv["ip"], dh.mac + " " + dhEv["ip"]}
	if len(known) != 2 || !(known[0] == want[0] && known[1] == want[1] || known[0] == want[1] && known[1] == want[0]) {
		t.Fatalf("the restarted server knows %v, want %v", known, want)
	}
	l.router.serve(t, s2)

	udProc.Process.Signal(syscall.SIGUSR1) // renew now
	renewEv, _ := ud.waitEvent(t, udN+1, "renew", "bound")
	if renewEv["event"] != "renew" || renewEv["ip"] != udEv["ip"] {
		t.Errorf("udhcpc after the restart: %v, want a renewal of %s", renewEv, udEv["ip"])
	}

	// A new dhclient with the same lease file asks for its address back.
	old, err := os.ReadFile(dh.events)
	if err != nil {
		t.Fatal(err)
	}
	dh.dhclient(t)
	dhEv2, _ := dh.waitEvent(t, strings.Count(string(old), "\n"), "REBOOT", "BOUND")
	if dhEv2["ip"] != dhEv["ip"] {
		t.Errorf("dhclient after the restart: %v, want %s again", dhEv2, dhEv["ip"])
	}
	t.Logf("the restarted server: %+v", s2.Stats())
	if st := s2.Stats(); st.Acks < 2 || st.Naks != 0 {
		t.Errorf("the restarted server's stats %+v: want 2 ACKs, no NAK", st)
	}
}

// TestNetnsDecline: udhcpc -a checks the offered address with an ARP ping,
// finds a squatter on it and DECLINEs it; the server quarantines it and
// the client gets the next address.
func TestNetnsDecline(t *testing.T) {
	l := newLAN(t)
	s, err := New(netnsConfig(t), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	l.router.serve(t, s)
	squatter := l.client(t, "02:dc:00:00:00:21")
	squatter.ns.run(t, "ip", "addr", "add", "10.70.0.101/24", "dev", "c0") // the first pool address
	c := l.client(t, "02:dc:00:00:00:22")
	c.udhcpc(t, "-a", "-A", "1")
	ev, _ := c.waitEvent(t, 0, "bound")
	if ev["ip"] == "10.70.0.101" {
		t.Fatalf("udhcpc bound the squatted address: %v", ev)
	}
	if st := s.Stats(); st.Declines != 1 {
		t.Errorf("stats %+v: want one DECLINE", st)
	}
	s.mu.Lock()
	_, quarantined := s.declined[netip.MustParseAddr("10.70.0.101")]
	s.mu.Unlock()
	if !quarantined {
		t.Error("the declined address is not quarantined")
	}
}

// TestNetnsReopen: Serve follows its interface when it is deleted and
// created again (as the supervisor recreates the host port) and when Update
// names another one.
func TestNetnsReopen(t *testing.T) {
	l := newLAN(t)
	cfg := netnsConfig(t)
	s, err := New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	l.router.serve(t, s)
	c := l.client(t, "02:dc:00:00:00:31")

	l.router.run(t, "ip", "link", "del", "br0")
	l.router.run(t, "ip", "link", "add", "br0", "type", "bridge", "forward_delay", "0")
	l.router.run(t, "ip", "addr", "add", "10.70.0.1/24", "dev", "br0")
	l.router.run(t, "ip", "link", "set", "br0", "up")
	l.router.run(t, "ip", "link", "set", "p1", "master", "br0", "up")
	c.udhcpc(t, "-q")
	ev, _ := c.waitEvent(t, 0, "bound") // within sweepEvery of the new br0
	checkOptions(t, "udhcpc after br0 was recreated", ev, "")

	// Another interface and subnet, live.
	l.router.run(t, "ip", "link", "add", "br1", "type", "bridge", "forward_delay", "0")
	l.router.run(t, "ip", "addr", "add", "10.71.0.1/24", "dev", "br1")
	l.router.run(t, "ip", "link", "set", "br1", "up")
	l.router.run(t, "ip", "link", "set", "p1", "nomaster")
	l.router.run(t, "ip", "link", "set", "p1", "master", "br1", "up")
	cfg.Interface, cfg.Subnet, cfg.ServerIP = "br1", netip.MustParsePrefix("10.71.0.0/24"), netip.MustParseAddr("10.71.0.1")
	cfg.PoolStart, cfg.PoolEnd, cfg.Static, cfg.Exclude, cfg.NTP = netip.Addr{}, netip.Addr{}, nil, nil, nil
	if err := s.Update(cfg); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(c.events)
	c.udhcpc(t, "-q")
	ev, _ = c.waitEvent(t, strings.Count(string(old), "\n"), "bound")
	if ev["ip"] != "10.71.0.2" || ev["router"] != "10.71.0.1" {
		t.Errorf("udhcpc on br1: %v, want 10.71.0.2 via 10.71.0.1", ev)
	}
}
