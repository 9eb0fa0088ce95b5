//go:build linux && (amd64 || arm64)

package timesync

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// The chrony test runs Debian's chronyd as a real NTP server ("local
// stratum 8", no upstream, -x: it never touches a clock) in two network
// namespaces, srv1 and srv2, each joined to a third, cli, by a veth pair:
//
//	srv1 10.77.1.1 ── veth ── 10.77.1.2 cli 10.77.2.2 ── veth ── 10.77.2.1 srv2
//
// The client under test runs in this process with its sockets in cli and a
// recording fake clock; a Go falseticker an hour ahead listens in srv2 on
// port 1123. All traffic stays inside these namespaces.

// newNetns creates a namespace with lo up, removed when the test ends.
func newNetns(t *testing.T, role string) *netnstest.Namespace {
	t.Helper()
	ns := netnstest.New(t, "tsync-"+role)
	ns.IP(t, "link", "set", "lo", "up")
	return ns
}

// link joins a (device veth0, address aAddr) and b (device bDev, address
// bAddr) with a veth pair.
func link(t *testing.T, a *netnstest.Namespace, aAddr string, b *netnstest.Namespace, bDev, bAddr string) {
	t.Helper()
	netnstest.Veth(t, netnstest.End{NS: a, Name: "veth0", Addrs: []string{aAddr}, Up: true},
		netnstest.End{NS: b, Name: bDev, Addrs: []string{bAddr}, Up: true})
}

// startChrony runs chronyd as a stratum 8 server in ns until the test ends.
func startChrony(t *testing.T, ns *netnstest.Namespace) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "chrony.conf")
	// No sources; serve everyone; no command socket (cmdport 0, and
	// bindcmdaddress / for the Unix one) so nothing outside dir is used.
	err := os.WriteFile(conf, []byte(strings.Join([]string{
		"local stratum 8",
		"allow",
		"port 123",
		"cmdport 0",
		"bindcmdaddress /",
		"pidfile " + filepath.Join(dir, "chronyd.pid"),
	}, "\n")+"\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// -d: foreground, log to stderr; -x: never adjust the system clock;
	// -u root: no privilege drop (the pid file stays removable).
	cmd := ns.Command("chronyd", "-d", "-x", "-u", "root", "-f", conf)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("chronyd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("chronyd in %s:\n%s", ns.Name(), out.String())
		}
	})
}

// kernelClock is the host kernel's clock discipline state, read only.
func kernelClock(t *testing.T) (unsynced bool, freq int64) {
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		t.Fatalf("adjtimex: %v", err)
	}
	return tx.Status&unix.STA_UNSYNC != 0, tx.Freq
}

func TestChrony(t *testing.T) {
	testenv.Require(t, "root", "ip", "chronyd")
	unsynced, freq := kernelClock(t)

	cli, srv1, srv2 := newNetns(t, "cli"), newNetns(t, "srv1"), newNetns(t, "srv2")
	link(t, srv1, "10.77.1.1/24", cli, "veth1", "10.77.1.2/24")
	link(t, srv2, "10.77.2.1/24", cli, "veth2", "10.77.2.2/24")
	startChrony(t, srv1)
	startChrony(t, srv2)
	var falseConn *net.UDPConn
	if err := srv2.In(func() (err error) {
		falseConn, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(10, 77, 2, 1), Port: 1123})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	falseticker := serveFake(t, falseConn, behaviour{offset: time.Hour})

	clock := &fakeClock{shift: -3 * time.Second} // 3 s slow
	cfg := Config{
		Servers:     []string{"chrony-1.test", "10.77.2.1", "10.77.2.1:1123"},
		Resolver:    mapResolver{"chrony-1.test": {netip.MustParseAddr("10.77.1.1")}},
		Clock:       clock,
		MinInterval: 400 * ms,
		Interval:    1600 * ms,
		Timeout:     time.Second,
		Floor:       time.Now().Add(-365 * 24 * time.Hour),
	}
	c, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	c.dial = func(_ netip.Addr, ap netip.AddrPort) (conn net.Conn, err error) {
		err = cli.In(func() (err error) {
			conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(ap))
			return err
		})
		return conn, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	waitSynced(t, c, 10*time.Second)
	actions, _ := clock.record()
	if diff := cmp.Diff([]action{{Step: true, Offset: 3 * time.Second}}, actions[:1], approx); diff != "" {
		t.Errorf("first correction (-want +got):\n%s", diff)
	}
	st := c.Status()
	if st.Stratum != 8 || (st.Server != "chrony-1.test" && st.Server != "10.77.2.1") {
		t.Errorf("synced from %s (stratum %d), want a chronyd (stratum 8)", st.Server, st.Stratum)
	}
	type server struct {
		Server      string
		Stratum     uint8
		Falseticker bool
		LastError   string
	}
	var got []server
	for _, s := range st.Servers {
		got = append(got, server{s.Server, s.Stratum, s.Falseticker, s.LastError})
	}
	want := []server{{"chrony-1.test", 8, false, ""}, {"10.77.2.1", 8, false, ""}, {"10.77.2.1:1123", 2, true, ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	if falseticker.requests.Load() == 0 {
		t.Error("the falseticker was never asked")
	}

	// Steady state: a 40 ms drift is slewed away, against chrony's answers.
	from := len(actions)
	clock.drift(40 * ms)
	eventually(t, 5*time.Second, "drift of 40 ms slewed back", func() bool {
		sum, steps := since(clock, from)
		return cmp.Equal(-40*ms, sum, approx) && steps == 0
	})

	if u, f := kernelClock(t); u != unsynced || f != freq {
		t.Errorf("host kernel clock state changed: STA_UNSYNC %v→%v, freq %d→%d", unsynced, u, freq, f)
	}
}
