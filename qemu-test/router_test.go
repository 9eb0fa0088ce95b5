package qemutest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"e1kbox/firmware/build"
	"e1kbox/firmware/instance"
	"e1kbox/firmware/vm"
	"e1kbox/internal/dhcptest"
	"e1kbox/internal/testenv"

	"github.com/google/go-cmp/cmp"
)

// Zero-touch: the target under TCG, and the limit the test fails
// above, generous for a loaded 2-core CI machine.
const (
	zeroTouchTarget = 60 * time.Second
	zeroTouchLimit  = 3 * time.Minute
)

// TestRouterZeroTouch powers on the router image as it ships
// (examples/router) between an ISP (dnsmasq: DHCP and DNS) on its WAN port
// and a LAN host running Debian's dhclient, and measures zero-touch: from
// power-on (QEMU's start) to the LAN host holding a lease from the box and
// resolving a name through it, nothing configured by hand. Then the box is
// healthy and its guard has confirmed the build (the health gate of its
// updates). Boot it several times for the spread: go test -count=N.
func TestRouterZeroTouch(t *testing.T) {
	requireQEMU(t)
	requireRoot(t)
	testenv.Require(t, "dig")
	m := theRouterBuild(t)
	factory, err := vm.ReadFactory(filepath.Join(repoRoot, routerConfig))
	if err != nil {
		t.Fatal(err)
	}
	wan, _, err := factory.DataPort("wan")
	if err != nil {
		t.Fatal(err)
	}
	lan, lanPort, err := factory.DataPort("lan")
	if err != nil {
		t.Fatal(err)
	}
	if len(lanPort.Addresses) == 0 {
		t.Fatalf("the LAN port has no address: %+v", lanPort)
	}
	lanNet, err := netip.ParsePrefix(lanPort.Addresses[0])
	if err != nil {
		t.Fatal(err)
	}
	routerLAN := lanNet.Addr()

	var r *routerBoot
	for attempt := 1; ; attempt++ {
		if r, err = powerOnRouter(t, m, wan, lan, routerLAN); err == nil {
			break
		}
		if attempt == 1 && errors.Is(err, errEarlyPanic) {
			// The TCG flake bootForAny retries too, said loudly.
			t.Logf("TCG FLAKE: %v; powering on a fresh disk once more", err)
			continue
		}
		t.Fatal(err)
	}
	b, zt := r.box, r.zeroTouch
	t.Logf("ZERO-TOUCH %.1fs from power-on (target %v under TCG): WAN lease from the ISP %s, LAN lease %.1fs, DNS answer %.1fs; the ISP and the LAN host were ready %.1fs after power-on",
		zt.dns.Seconds(), zeroTouchTarget, seen(zt.wanLease), zt.lanLease.Seconds(), zt.dns.Seconds(), zt.ready.Seconds())
	t.Logf("boot timeline (host time since power-on):\n%s", b.Timeline())
	if zt.dns > zeroTouchTarget {
		t.Logf("zero-touch %.1fs is over the %v target (a loaded machine?)", zt.dns.Seconds(), zeroTouchTarget)
	}

	// The lease: an address of the box's pool, the box as router and DNS.
	var st struct {
		WAN struct {
			Address string `json:"address"`
		} `json:"wan"`
		DHCP struct {
			PoolStart netip.Addr `json:"pool_start"`
			PoolEnd   netip.Addr `json:"pool_end"`
		} `json:"dhcp"`
	}
	if err := b.api(http.MethodGet, "/api/router", nil, &st); err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(zt.lease["ip"])
	if err != nil || ip.Less(st.DHCP.PoolStart) || st.DHCP.PoolEnd.Less(ip) || !lanNet.Contains(ip) || ip == routerLAN {
		t.Errorf("the LAN host's address %q (%v) is not in the box's pool %s-%s in %s", zt.lease["ip"], err, st.DHCP.PoolStart, st.DHCP.PoolEnd, lanNet)
	}
	if zt.lease["router"] != routerLAN.String() || zt.lease["dns"] != routerLAN.String() {
		t.Errorf("lease %v: want router and DNS server %s (the box)", zt.lease, routerLAN)
	}
	if zt.answer != ispAnswer {
		t.Errorf("%s through the box: %q, want the ISP's answer %s", ispName, zt.answer, ispAnswer)
	}
	first, last, _ := strings.Cut(ispPool, "-")
	if wanIP, err := netip.ParsePrefix(st.WAN.Address); err != nil || wanIP.Addr().Less(netip.MustParseAddr(first)) || netip.MustParseAddr(last).Less(wanIP.Addr()) {
		t.Errorf("the box's WAN address %q (%v): want one of the ISP's pool %s", st.WAN.Address, err, ispPool)
	}
	t.Logf("LAN lease %s (pool %s-%s), router and DNS %s; box WAN %s", ip, st.DHCP.PoolStart, st.DHCP.PoolEnd, routerLAN, st.WAN.Address)

	// Healthy, and the guard (the health gate of the box's updates)
	// confirmed the build.
	if err := r.healthy(); err != nil {
		t.Fatalf("%s\nnot healthy: %v", b.diagnosis(reason("the router's first boot")), err)
	}
	t.Logf("healthy %.1fs after power-on", r.healthyAt.Seconds())
	var gk struct{ Services []struct{ Path string } }
	if err := getJSON(b.gokrazyURL(b.password), &gk); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(gk.Services, func(s struct{ Path string }) bool { return s.Path == "/user/guard" }) {
		t.Errorf("gokrazy runs %v, want /user/guard", gk.Services)
	}
	line, err := b.logLine("/user/guard", "stderr", "guard: build confirmed", 3*time.Minute)
	if err != nil {
		t.Fatalf("the guard: %v", err)
	}
	t.Logf("guard: %s", line)
}

// TestRouterConfigHasTheGuard: the router image carries the guard with the
// bridge image's flags, so its updates are health-gated the same way.
func TestRouterConfigHasTheGuard(t *testing.T) {
	const guard = "e1kbox/firmware/guard"
	bridge, err := instance.Load(filepath.Join(repoRoot, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := instance.Load(filepath.Join(repoRoot, routerConfig))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.Packages, guard) {
		t.Errorf("%s: Packages %v lack %s", routerConfig, r.Packages, guard)
	}
	if diff := cmp.Diff(bridge.PackageConfig[guard], r.PackageConfig[guard]); diff != "" {
		t.Errorf("the guard's PackageConfig, config.json (-) vs %s (+):\n%s", routerConfig, diff)
	}
}

// routerBoot is a router box powered on between an ISP and a LAN host.
type routerBoot struct {
	box       *box
	zeroTouch zeroTouch
	healthy   func() error  // waits for the health poll's end
	healthyAt time.Duration // since power-on, once healthy has returned nil
}

// zeroTouch is what the LAN host saw, with the times since power-on.
type zeroTouch struct {
	ready    time.Duration // the ISP and the LAN host in place
	wanLease time.Duration // the ISP leased the box its WAN address
	lanLease time.Duration // the LAN host's client bound its lease
	dns      time.Duration // the LAN host's first DNS answer through the box
	lease    dhcptest.Event
	answer   string
}

// seen is a time since power-on, or that it did not happen.
func seen(d time.Duration) string {
	if d == 0 {
		return "not seen"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

var errEarlyPanic = errors.New("the kernel panicked early in the boot")

// powerOnRouter boots the router image m on a fresh disk with the ISP on
// data port wan and a LAN host on data port lan, and waits for the LAN
// host's lease and DNS answer.
func powerOnRouter(t *testing.T, m *build.Manifest, wan, lan int, routerLAN netip.Addr) (*routerBoot, error) {
	t.Helper()
	var taps [2]string
	taps[wan], taps[lan] = newTap(t), newTap(t)
	img := copyImage(t, m.Image)
	start := time.Now() // power-on
	v, err := vm.Start(context.Background(), vm.Options{Image: img, DataTaps: taps, OneTCGThread: true})
	if err != nil {
		return nil, err
	}
	b := &box{VM: v, t: t, password: m.Password, image: img}
	t.Cleanup(func() {
		b.saveConsole(t.Name())
		b.Kill()
	})
	// QEMU opens the taps by name here; they move into the hosts'
	// namespaces while the box's kernel boots.
	for _, tap := range taps {
		if err := waitTapOpened(tap, 30*time.Second); err != nil {
			return nil, err
		}
	}
	isp := startISP(t, attach(t, taps[wan], ""))
	lanHost := attach(t, taps[lan], "")
	dc := dhcptest.New(t, lanHost.ns, lanHost.dev, "lan", t.TempDir(), true)
	dhclient(t, dc)
	zt := zeroTouch{ready: time.Since(start)}

	r := &routerBoot{box: b}
	ctx, cancel := context.WithCancel(context.Background())
	r.healthy = joined(t, func() error {
		err := pollHealthy(ctx, b, m.BuildTimestamp, start.Add(bootTimeout))
		r.healthyAt = time.Since(start)
		return err
	})
	t.Cleanup(cancel) // before the join (cleanups run last first)

	wanMAC := vm.DataMAC(wan)
	deadline := start.Add(zeroTouchLimit)
	for zt.dns == 0 {
		if time.Now().After(deadline) {
			cancel()
			return nil, fmt.Errorf("%s\nthe ISP's dnsmasq:\n%s\nno zero-touch within %v of power-on: WAN lease %s, LAN lease %s (%v); the LAN client's events: %v",
				b.diagnosis(reason("the router's first boot")), tail(isp.String(), 20), zeroTouchLimit, seen(zt.wanLease), seen(zt.lanLease), zt.lease, dc.Events())
		}
		select {
		case <-v.Done():
			cancel()
			return nil, fmt.Errorf("QEMU exited %v after power-on: %v\n%s", time.Since(start), v.Err(), tail(v.Console(), 40))
		default:
		}
		if c := v.Console(); strings.Contains(c, "Kernel panic") || strings.Contains(c, "Oops") {
			cancel()
			v.Kill() // its console is saved at cleanup
			return nil, fmt.Errorf("%w (%v after power-on); console tail:\n%s", errEarlyPanic, time.Since(start), tail(c, 30))
		}
		if zt.wanLease == 0 {
			if ispAcked(isp, wanMAC) {
				zt.wanLease = time.Since(start)
			}
		}
		if zt.lanLease == 0 {
			for _, ev := range dc.Events() {
				if ev["event"] == "BOUND" || ev["event"] == "REBOOT" {
					zt.lanLease, zt.lease = time.Since(start), ev
					break
				}
			}
		}
		if zt.lanLease == 0 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		// The resolver the lease gave (checked to be the box after).
		dns := strings.Fields(zt.lease["dns"] + " " + routerLAN.String())[0]
		out, err := lanHost.exec("dig", "+short", "+time=1", "+tries=1", "@"+dns, ispName)
		if ans, _ := digParse(out); err == nil && ans != "" {
			zt.dns, zt.answer = time.Since(start), ans
			break
		}
		time.Sleep(100 * time.Millisecond) // refused, or no upstream yet
	}
	r.zeroTouch = zt
	return r, nil
}

// dhclient starts Debian's dhclient as a host that was just plugged in:
// it asks every second or two until it has a lease (dhclient's defaults
// back off to 15 s and give up after 60 s, then wait 5 minutes: times of
// the client, not of the box).
func dhclient(t *testing.T, dc *dhcptest.Client) {
	t.Helper()
	conf := filepath.Join(dc.Dir, dc.Name+".zero-touch.conf")
	if err := os.WriteFile(conf, []byte("send host-name \""+dc.Name+"-dhclient\";\n"+
		"request subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, ntp-servers, interface-mtu;\n"+
		"initial-interval 1;\nbackoff-cutoff 2;\ntimeout 600;\nretry 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := dc.DhclientFiles(t)
	i := slices.Index(files, "-cf")
	if i < 0 || i+1 == len(files) {
		t.Fatalf("dhclient's files %q name no config", files)
	}
	files[i+1] = conf
	dc.Start(t, append([]string{"dhclient", "-4", "-d", "-v"}, files...)...)
}

// pollHealthy polls the box until it is healthy on build ts, the deadline
// passes or ctx ends; it only returns what it saw (it runs beside the
// test's goroutine).
func pollHealthy(ctx context.Context, b *box, ts string, deadline time.Time) error {
	for {
		err := b.healthyOn(ts)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy by the deadline: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped before healthy: %w", err)
		case <-time.After(time.Second):
		}
	}
}
