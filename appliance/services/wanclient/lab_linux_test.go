package wanclient

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// The netns lab: an "isp" namespace whose veth s0 (10.80.0.1/24) runs
// Debian's dnsmasq, and a "box" namespace whose veth c0 is up with no IPv4
// address at all, where the client runs from this test process on a
// thread moved into the namespace.

var (
	boxMAC = net.HardwareAddr{0x02, 0x80, 0x00, 0x00, 0x00, 0x01}
	ispMAC = net.HardwareAddr{0x02, 0x80, 0x00, 0x00, 0x00, 0xfe}
	ispIP  = netip.MustParseAddr("10.80.0.1")
)

type lab struct {
	t        *testing.T
	isp, box *netnstest.Namespace
	dir      string
	leases   string // dnsmasq's lease file

	mu      sync.Mutex
	dnsmasq *exec.Cmd
	dnsLog  *netnstest.Buffer
}

func newLab(t *testing.T) *lab {
	t.Helper()
	testenv.Require(t, "root", "ip", "dnsmasq")
	l := &lab{t: t, isp: netnstest.New(t, "wanc-isp"), box: netnstest.New(t, "wanc-box"), dir: t.TempDir()}
	l.leases = filepath.Join(l.dir, "dnsmasq.leases")
	t.Cleanup(l.stopDnsmasq)
	l.isp.IP(t, "link", "set", "lo", "up")
	netnstest.Veth(t, netnstest.End{NS: l.isp, Name: "s0", MAC: ispMAC.String(), Addrs: []string{"10.80.0.1/24"}, Up: true},
		netnstest.End{NS: l.box, Name: "c0", MAC: boxMAC.String(), Up: true})
	if out := l.box.IP(t, "-4", "addr", "show", "dev", "c0"); strings.TrimSpace(out) != "" {
		t.Fatalf("c0 has IPv4 addresses: %s", out)
	}
	return l
}

// startDnsmasq runs the ISP's DHCP server for a range and waits until it
// serves: leases of 30 s (which dnsmasq raises to its minimum, 2
// minutes), T1 5 s and T2 10 s, gateway and DNS 10.80.0.1, MTU 1400, no
// DNS service. It pings an address before it offers it, as by default.
// extra are further dnsmasq arguments.
func (l *lab) startDnsmasq(from, to string, extra ...string) {
	l.t.Helper()
	buf := &netnstest.Buffer{}
	cmd := l.isp.Command(append([]string{"dnsmasq",
		"--no-daemon", "--conf-file=/dev/null", "--user=root", "--pid-file=",
		"--port=0", "--bind-interfaces", "--interface=s0",
		"--dhcp-range=" + from + "," + to + ",255.255.255.0,30s",
		"--dhcp-leasefile=" + l.leases,
		"--dhcp-option=3,10.80.0.1", "--dhcp-option=6,10.80.0.1", "--dhcp-option=26,1400",
		"--dhcp-option=option:T1,5", "--dhcp-option=option:T2,10",
		"--log-facility=-", "--log-dhcp"}, extra...)...)
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("dnsmasq: %v", err)
	}
	l.mu.Lock()
	l.dnsmasq, l.dnsLog = cmd, buf
	l.mu.Unlock()
	if !eventually(30*time.Second, func() bool { return strings.Contains(buf.String(), "DHCP, IP range "+from) }) {
		l.t.Fatalf("dnsmasq did not start:\n%s", buf.String())
	}
}

func (l *lab) stopDnsmasq() {
	l.mu.Lock()
	cmd, buf := l.dnsmasq, l.dnsLog
	l.dnsmasq = nil
	l.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if l.t.Failed() || testing.Verbose() {
		l.t.Logf("dnsmasq's log:\n%s", buf.String())
	}
}

// dnsmasqLease is a line of dnsmasq's lease file.
type dnsmasqLease struct {
	expiry   time.Time
	mac      string
	addr     netip.Addr
	hostname string
	clientID string
}

// dnsmasqLease returns dnsmasq's lease for mac, if it has one.
func (l *lab) dnsmasqLease(mac net.HardwareAddr) (dnsmasqLease, bool) {
	f, err := os.Open(l.leases)
	if err != nil {
		return dnsmasqLease{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 || fs[1] != mac.String() {
			continue
		}
		exp, _ := strconv.ParseInt(fs[0], 10, 64)
		a, _ := netip.ParseAddr(fs[2])
		return dnsmasqLease{expiry: time.Unix(exp, 0), mac: fs[1], addr: a, hostname: fs[3], clientID: fs[4]}, true
	}
	return dnsmasqLease{}, false
}

// boxClient is a Client running in the box namespace.
type boxClient struct {
	c       *Client
	started time.Time
	changes chan change
	err     error // Run's, once it returned
	cancel  context.CancelFunc
	wait    func()
	once    sync.Once
}

// startClient runs a client on c0 in the box namespace until the test
// ends (or stop). onChange stands in for the dataplane, which answers ARP
// for the WAN address on the box: it gives the ISP's kernel a neighbour
// entry for the address, which dnsmasq needs to unicast its answers to
// renewals.
func (l *lab) startClient(cfg Config, clk dhcpclient.Clock) *boxClient {
	l.t.Helper()
	c, err := New(cfg, slog.New(slog.NewTextHandler(testWriter{l.t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		l.t.Fatal(err)
	}
	if clk != nil {
		c.core.Clock = clk
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &boxClient{c: c, changes: make(chan change, 64), cancel: cancel}
	onChange := func(old, new *Lease) {
		if new != nil {
			l.isp.Command("ip", "neigh", "replace", new.Addr.Addr().String(),
				"lladdr", boxMAC.String(), "dev", "s0", "nud", "permanent").Run()
		}
		select {
		case b.changes <- change{old, new}:
		case <-ctx.Done():
		}
	}
	b.started = time.Now()
	b.wait = l.box.Go(l.t, func() { b.err = c.Run(ctx, onChange) })
	l.t.Cleanup(func() { b.stop(l.t) })
	return b
}

// stop ends Run, waits for it and checks it returned nil.
func (b *boxClient) stop(t *testing.T) {
	t.Helper()
	b.once.Do(func() {
		b.cancel()
		b.wait()
		if b.err != nil {
			t.Errorf("Run: %v", b.err)
		}
	})
}

func (b *boxClient) change(t *testing.T, within time.Duration) change {
	t.Helper()
	select {
	case c := <-b.changes:
		return c
	case <-time.After(within):
		st := b.c.Stats()
		t.Fatalf("no onChange within %v (state %s, sent %v, received %v, ignored %v, last error %q)",
			within, st.State, st.Sent, st.Received, st.Ignored, st.LastError)
		return change{}
	}
}

// eventually polls cond every 10 ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// scaledClock runs factor times faster than real time from base.
type scaledClock struct {
	base   time.Time
	factor time.Duration
}

func (c scaledClock) Now() time.Time { return c.base.Add(time.Since(c.base) * c.factor) }

func (c scaledClock) Timer(at time.Time) (<-chan time.Time, func()) {
	t := time.NewTimer(at.Sub(c.Now()) / c.factor)
	return t.C, func() { t.Stop() }
}
