package wanclient

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
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

	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// The netns lab: an "isp" namespace whose veth s0 (10.80.0.1/24) runs
// Debian's dnsmasq, and a "box" namespace whose veth c0 is up with no IPv4
// address at all, where the client runs from this test process on a
// thread moved into the namespace. (A minimal local helper: the shared
// netns helper package is not in this tree yet.)

var (
	boxMAC = net.HardwareAddr{0x02, 0x80, 0x00, 0x00, 0x00, 0x01}
	ispMAC = net.HardwareAddr{0x02, 0x80, 0x00, 0x00, 0x00, 0xfe}
	ispIP  = netip.MustParseAddr("10.80.0.1")
)

type lab struct {
	t        *testing.T
	isp, box string // namespace names
	dir      string
	leases   string // dnsmasq's lease file

	mu      sync.Mutex
	dnsmasq *exec.Cmd
	dnsLog  *netnstest.Buffer
}

func newLab(t *testing.T) *lab {
	t.Helper()
	testenv.Require(t, "root", "ip", "dnsmasq")
	id := os.Getpid() % 100000
	l := &lab{t: t, isp: fmt.Sprintf("wanc%d-isp", id), box: fmt.Sprintf("wanc%d-box", id), dir: t.TempDir()}
	l.leases = filepath.Join(l.dir, "dnsmasq.leases")
	for _, ns := range []string{l.isp, l.box} {
		exec.Command("ip", "netns", "del", ns).Run() // a leftover of a killed run
		l.ip("netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	t.Cleanup(l.stopDnsmasq)
	l.ip("-n", l.isp, "link", "add", "s0", "address", ispMAC.String(), "type", "veth",
		"peer", "name", "c0", "address", boxMAC.String(), "netns", l.box)
	l.ip("-n", l.isp, "addr", "add", "10.80.0.1/24", "dev", "s0")
	l.ip("-n", l.isp, "link", "set", "s0", "up")
	l.ip("-n", l.isp, "link", "set", "lo", "up")
	l.ip("-n", l.box, "link", "set", "c0", "up")
	if out := l.ip("-n", l.box, "-4", "addr", "show", "dev", "c0"); strings.TrimSpace(out) != "" {
		t.Fatalf("c0 has IPv4 addresses: %s", out)
	}
	return l
}

func (l *lab) ip(args ...string) string {
	l.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startDnsmasq runs the ISP's DHCP server for a range and waits until it
// serves: leases of 30 s (which dnsmasq raises to its minimum, 2
// minutes), T1 5 s and T2 10 s, gateway and DNS 10.80.0.1, MTU 1400, no
// DNS service. It pings an address before it offers it, as by default.
func (l *lab) startDnsmasq(from, to string) {
	l.t.Helper()
	buf := &netnstest.Buffer{}
	cmd := exec.Command("ip", "netns", "exec", l.isp, "dnsmasq",
		"--no-daemon", "--conf-file=/dev/null", "--user=root", "--pid-file=",
		"--port=0", "--bind-interfaces", "--interface=s0",
		"--dhcp-range="+from+","+to+",255.255.255.0,30s",
		"--dhcp-leasefile="+l.leases,
		"--dhcp-option=3,10.80.0.1", "--dhcp-option=6,10.80.0.1", "--dhcp-option=26,1400",
		"--dhcp-option=option:T1,5", "--dhcp-option=option:T2,10",
		"--log-facility=-", "--log-dhcp")
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("dnsmasq: %v", err)
	}
	l.mu.Lock()
	l.dnsmasq, l.dnsLog = cmd, buf
	l.mu.Unlock()
	if !eventually(10*time.Second, func() bool { return strings.Contains(buf.String(), "DHCP, IP range "+from) }) {
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

// goInNS runs f on a new goroutine whose thread is in namespace ns. The
// thread stays locked: it dies with the goroutine instead of going back
// to the pool in the wrong namespace.
func goInNS(t *testing.T, ns string, f func()) {
	t.Helper()
	nsf, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := unix.Setns(int(nsf.Fd()), unix.CLONE_NEWNET)
		nsf.Close()
		entered <- err
		if err == nil {
			f()
		}
	}()
	if err := <-entered; err != nil {
		t.Fatalf("setns %s: %v", ns, err)
	}
}

// boxClient is a Client running in the box namespace.
type boxClient struct {
	c       *Client
	started time.Time
	changes chan change
	done    chan error
	cancel  context.CancelFunc
}

// startClient runs a client on c0 in the box namespace. onChange stands in
// for the dataplane, which answers ARP for the WAN address on the box:
// it gives the ISP's kernel a neighbour entry for the address, which
// dnsmasq needs to unicast its answers to renewals.
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
	b := &boxClient{c: c, changes: make(chan change, 64), done: make(chan error, 1), cancel: cancel}
	onChange := func(old, new *Lease) {
		if new != nil {
			exec.Command("ip", "-n", l.isp, "neigh", "replace", new.Addr.Addr().String(),
				"lladdr", boxMAC.String(), "dev", "s0", "nud", "permanent").Run()
		}
		b.changes <- change{old, new}
	}
	b.started = time.Now()
	goInNS(l.t, l.box, func() { b.done <- c.Run(ctx, onChange) })
	l.t.Cleanup(func() { b.stop(l.t) })
	return b
}

// stop ends Run and checks it returned nil.
func (b *boxClient) stop(t *testing.T) {
	t.Helper()
	b.cancel()
	select {
	case err := <-b.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		b.done <- nil
	case <-time.After(5 * time.Second):
		t.Errorf("Run did not return")
	}
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

// capture counts, in namespace ns on dev, the frames for which match holds
// until stop is called, which returns the count.
func capture(t *testing.T, ns, dev string, match func([]byte) bool) (stop func() int) {
	t.Helper()
	var fd int
	opened := make(chan error, 1)
	goInNS(t, ns, func() {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			opened <- err
			return
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err == nil {
			err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
		}
		opened <- err
	})
	if err := <-opened; err != nil {
		t.Fatalf("capture on %s: %v", dev, err)
	}
	var n atomic.Int64
	stopc, done := make(chan struct{}), make(chan struct{})
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	go func() {
		defer close(done)
		buf := make([]byte, 1<<16)
		for {
			select {
			case <-stopc:
				return
			default:
			}
			k, _, err := unix.Recvfrom(fd, buf, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			if match(buf[:k]) {
				n.Add(1)
			}
		}
	}()
	return func() int {
		close(stopc)
		<-done
		unix.Close(fd)
		return int(n.Load())
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestNetnsDnsmasq runs the client against Debian's dnsmasq as the ISP's
// DHCP server, on an interface without any IPv4 address: lease, renewal,
// INIT-REBOOT after a restart, expiry with the server gone, a new address
// from a new range, release.
//
// dnsmasq's shortest lease is 2 minutes (it raises the range's 30s to
// 2m), but it sends T1 and T2 as told: 5 s and 10 s, so renewals happen in
// real time. The expiry phase runs its client on a clock 8 times faster
// than real time, so that the 120 s lease ends 15 s after the server went
// away; everything on the wire is real.
func TestNetnsDnsmasq(t *testing.T) {
	l := newLab(t)
	l.startDnsmasq("10.80.0.100", "10.80.0.150")
	cfg := Config{Interface: "c0", MAC: boxMAC, Hostname: "e1kbox-test", LeaseFile: filepath.Join(l.dir, "perm", "wan.lease")}
	inRange := func(a netip.Addr, from, to string) bool {
		return a.Compare(netip.MustParseAddr(from)) >= 0 && a.Compare(netip.MustParseAddr(to)) <= 0
	}
	var first *Lease

	t.Run("lease", func(t *testing.T) {
		b := l.startClient(cfg, nil)
		ch := b.change(t, 20*time.Second)
		took := time.Since(b.started)
		t.Logf("time to lease: %v", took)
		first = ch.new
		if ch.old != nil || first == nil {
			t.Fatalf("onChange(%v, %v), want (nil, lease)", ch.old, ch.new)
		}
		if !inRange(first.Addr.Addr(), "10.80.0.100", "10.80.0.150") || first.Addr.Bits() != 24 {
			t.Errorf("address %v, want one of 10.80.0.100-150/24", first.Addr)
		}
		if first.Gateway != ispIP || len(first.DNS) != 1 || first.DNS[0] != ispIP || first.MTU != 1400 {
			t.Errorf("gateway %v, DNS %v, MTU %d; want 10.80.0.1, [10.80.0.1], 1400", first.Gateway, first.DNS, first.MTU)
		}
		if first.Server != ispIP || !macEqual(first.ServerMAC, ispMAC) {
			t.Errorf("server %v at %s, want %v at %s", first.Server, first.ServerMAC, ispIP, ispMAC)
		}
		if d := first.T1.Sub(first.Obtained); d != 5*time.Second {
			t.Errorf("T1 after %v, want 5s", d)
		}
		if d := first.T2.Sub(first.Obtained); d != 10*time.Second {
			t.Errorf("T2 after %v, want 10s", d)
		}
		if d := first.Expiry.Sub(first.Obtained); d != 120*time.Second {
			t.Errorf("lease of %v, want dnsmasq's minimum of 2m", d)
		}
		var dl dnsmasqLease
		if !eventually(5*time.Second, func() (ok bool) { dl, ok = l.dnsmasqLease(boxMAC); return ok }) {
			t.Fatalf("dnsmasq's lease file has no lease for %s", boxMAC)
		}
		if dl.addr != first.Addr.Addr() || dl.hostname != "e1kbox-test" || dl.clientID != "01:"+boxMAC.String() {
			t.Errorf("dnsmasq's lease %+v, want %v for e1kbox-test, client id 01:%s", dl, first.Addr.Addr(), boxMAC)
		}
		if out := l.ip("-n", l.box, "-4", "addr", "show", "dev", "c0"); strings.TrimSpace(out) != "" {
			t.Errorf("the client put an address on c0: %s", out)
		}

		t.Run("renew", func(t *testing.T) {
			// The renewal at T1 is unicast: to 10.80.0.1 at the ISP's MAC,
			// from the leased address.
			unicast := capture(t, l.isp, "s0", func(b []byte) bool {
				u, why := dhcpclient.DecodeIPv4(b, serverPort, true)
				return why == "" && macEqual(u.DstMAC, ispMAC) && u.DstIP == ispIP && u.SrcIP == first.Addr.Addr()
			})
			if !eventually(10*time.Second, func() bool {
				cur := b.c.Current()
				return cur != nil && cur.Obtained.After(first.Obtained)
			}) {
				t.Fatalf("no renewal within 10 s (stats %+v)", b.c.Stats())
			}
			if n := unicast(); n == 0 {
				t.Errorf("no unicast REQUEST reached the server")
			}
			cur := b.c.Current()
			if d := cur.Obtained.Sub(first.Obtained); d < 4*time.Second || d > 7*time.Second {
				t.Errorf("renewed %v after the lease, want about T1 (5 s)", d)
			}
			if !sameConfig(first, cur) {
				t.Errorf("renewal changed the lease: %+v -> %+v", first, cur)
			}
			var dl2 dnsmasqLease
			if !eventually(5*time.Second, func() (ok bool) {
				dl2, ok = l.dnsmasqLease(boxMAC)
				return ok && dl2.expiry.After(dl.expiry)
			}) {
				t.Errorf("dnsmasq did not extend the lease: expiry %v, then %v", dl.expiry, dl2.expiry)
			}
			select {
			case c := <-b.changes:
				t.Errorf("renewal called onChange(%+v, %+v)", c.old, c.new)
			default:
			}
		})
		b.stop(t)
		if b.c.Current() == nil {
			t.Errorf("stopping Run dropped the lease")
		}
	})
	if first == nil {
		t.FailNow()
	}

	t.Run("init-reboot", func(t *testing.T) {
		b := l.startClient(cfg, nil)
		ch := b.change(t, 10*time.Second)
		t.Logf("time to lease with INIT-REBOOT: %v", time.Since(b.started))
		if ch.old != nil || ch.new == nil || ch.new.Addr != first.Addr {
			t.Fatalf("onChange(%v, %v), want (nil, %v)", ch.old, ch.new, first.Addr)
		}
		if st := b.c.Stats(); st.Sent["DISCOVER"] != 0 {
			t.Errorf("restart sent %d DISCOVERs; sent %v", st.Sent["DISCOVER"], st.Sent)
		}
		b.stop(t)
	})

	t.Run("expiry and a new range", func(t *testing.T) {
		b := l.startClient(cfg, scaledClock{base: time.Now(), factor: 8})
		if ch := b.change(t, 10*time.Second); ch.new == nil || ch.new.Addr != first.Addr {
			t.Fatalf("restart got %v, want %v", ch.new, first.Addr)
		}
		l.stopDnsmasq()
		stopped := time.Now()
		before := b.c.Stats()
		ch := b.change(t, 25*time.Second) // 120 s on the client's clock
		t.Logf("lease given up %v after the server stopped", time.Since(stopped))
		if ch.new != nil || ch.old == nil || ch.old.Addr != first.Addr {
			t.Fatalf("onChange(%v, %v), want (lease, nil)", ch.old, ch.new)
		}
		if b.c.Current() != nil {
			t.Errorf("Current() = %v after expiry", b.c.Current())
		}
		// It kept asking (renewing, rebinding) and keeps discovering.
		if !eventually(5*time.Second, func() bool { return b.c.Stats().Sent["DISCOVER"] >= before.Sent["DISCOVER"]+2 }) {
			t.Errorf("no DISCOVERs after expiry: %v", b.c.Stats().Sent)
		}
		if after := b.c.Stats(); after.Sent["REQUEST"] < before.Sent["REQUEST"]+2 {
			t.Errorf("REQUESTs %d before, %d after: no renewing and rebinding", before.Sent["REQUEST"], after.Sent["REQUEST"])
		}

		l.startDnsmasq("10.80.0.200", "10.80.0.250")
		restarted := time.Now()
		ch = b.change(t, 20*time.Second)
		t.Logf("new lease %v after the server came back", time.Since(restarted))
		if ch.old != nil || ch.new == nil || !inRange(ch.new.Addr.Addr(), "10.80.0.200", "10.80.0.250") {
			t.Fatalf("onChange(%v, %v), want (nil, one of 10.80.0.200-250)", ch.old, ch.new)
		}

		t.Run("release", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.c.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if c := b.change(t, 5*time.Second); c.new != nil {
				t.Errorf("Release: onChange(%v, %v)", c.old, c.new)
			}
			if !eventually(5*time.Second, func() bool { _, ok := l.dnsmasqLease(boxMAC); return !ok }) {
				t.Errorf("dnsmasq kept the lease after the RELEASE")
			}
			if _, err := os.Stat(cfg.LeaseFile); !os.IsNotExist(err) {
				t.Errorf("lease file after Release: %v", err)
			}
		})
	})

	t.Run("MAC other than the interface's", func(t *testing.T) {
		// The router's WAN MAC may differ from the NIC's: the socket then
		// makes the interface promiscuous, for the server's unicast replies.
		mac := net.HardwareAddr{0x02, 0x80, 0x00, 0x00, 0x00, 0x99}
		b := l.startClient(Config{Interface: "c0", MAC: mac}, nil)
		ch := b.change(t, 20*time.Second)
		if ch.new == nil || !inRange(ch.new.Addr.Addr(), "10.80.0.200", "10.80.0.250") {
			t.Fatalf("onChange(%v, %v), want a lease", ch.old, ch.new)
		}
		if dl, ok := l.dnsmasqLease(mac); !ok || dl.addr != ch.new.Addr.Addr() {
			t.Errorf("dnsmasq's lease for %s: %+v", mac, dl)
		}
		if out := l.ip("-d", "-n", l.box, "link", "show", "c0"); !strings.Contains(out, "promiscuity 1") {
			t.Errorf("c0 is not promiscuous while the client runs:\n%s", out)
		}
		b.stop(t)
		if out := l.ip("-d", "-n", l.box, "link", "show", "c0"); !strings.Contains(out, "promiscuity 0") {
			t.Errorf("c0 stays promiscuous after Run:\n%s", out)
		}
	})
}

// TestNetnsIngressDrop: on the dataplane's WAN port the kernel's stack gets
// no frames (ingressdrop's tcx program drops them, or demotes them for the
// rings bound behind it when the fast path runs): the client, whose socket
// is bound to IPv4 behind tcx, still gets its lease under either program.
func TestNetnsIngressDrop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attach func(string) (*ingressdrop.Drop, error)
	}{{"drop", ingressdrop.Attach}, {"demote", ingressdrop.AttachDemote}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			l.startDnsmasq("10.80.0.100", "10.80.0.150")
			attached := make(chan error, 1)
			var drop *ingressdrop.Drop
			goInNS(t, l.box, func() {
				var err error
				drop, err = tc.attach("c0")
				attached <- err
			})
			if err := <-attached; err != nil {
				t.Fatalf("ingressdrop on c0: %v", err)
			}
			t.Cleanup(func() { drop.Close() })
			b := l.startClient(Config{Interface: "c0", MAC: boxMAC}, nil)
			if ch := b.change(t, 20*time.Second); ch.new == nil {
				t.Fatalf("no lease behind ingressdrop's %s", tc.name)
			}
		})
	}
}
