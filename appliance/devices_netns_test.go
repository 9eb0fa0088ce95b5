package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"e1kbox/internal/testenv"
	"e1kbox/webui"
)

// TestRouterDashboard runs the home router behind the ISP's dnsmasq and
// reads the router's services through the dashboard's API: the WAN lease,
// the DHCP server, the DNS forwarder and the clock on /api/router; a LAN
// host that took a lease from the box on /api/devices with the bytes of
// its connections; on the Devices page in chromium, "make static" that
// survives an appliance restart; "forget".
func TestRouterDashboard(t *testing.T) {
	l := newSvcLab(t)
	w := l.wan(t, 20*time.Second, "")
	h1 := l.clients[0]
	h1.Dhclient(t)
	ev1, _ := h1.WaitEvent(t, 0, "BOUND")
	l.mustHost(t, 1, "ping", "-c", "3", "-i", "0.2", "-s", "500", "-W", "2", svcISP) // bytes through the NAT
	const mac1 = "02:77:00:00:00:01"

	t.Run("router status", func(t *testing.T) {
		var st webui.RouterStatus
		getJSON(t, l.lab, "/api/router", &st)
		a := netip.MustParseAddr
		if st.WAN.Mode != webui.WANModeDHCP || st.WAN.State != webui.WANBound || st.WAN.Address.String() != w ||
			st.WAN.Gateway != a(svcISP) || fmt.Sprint(st.WAN.DNS) != "["+svcISP+"]" || st.WAN.MTU != 1400 ||
			st.WAN.Server != a(svcISP) || st.WAN.Port != "wan" || !st.WAN.Expiry.After(time.Now()) {
			t.Errorf("WAN %+v: want the dnsmasq lease %s (gateway and DNS %s, MTU 1400) on port wan", st.WAN, w, svcISP)
		}
		if d := st.DHCP; !d.Enabled || d.LeasesInUse != 1 || d.Acks < 1 || d.PoolStart != a("192.168.7.1") || d.PoolEnd != a("192.168.7.254") {
			t.Errorf("DHCP %+v: want on, h1's lease in use, the subnet's pool", d)
		}
		if d := st.DNS; !d.Enabled || fmt.Sprint(d.Listen) != "["+svcRouter+":53]" || fmt.Sprint(d.Upstreams) != "["+svcISP+":53]" || d.UpstreamsFrom != "wan" {
			t.Errorf("DNS %+v: want listening on %s:53, the lease's upstream", d, svcRouter)
		}
		if code, body := l.boxGet("/metrics"); code != 200 || !strings.Contains(body, "\ne1kbox_wan_up 1\n") ||
			!strings.Contains(body, "\ne1kbox_dhcp_leases_in_use 1\n") {
			t.Errorf("/metrics: %d, want e1kbox_wan_up 1 and e1kbox_dhcp_leases_in_use 1", code)
		}
	})

	t.Run("the Internet probe", func(t *testing.T) {
		var in webui.Reachability
		eventually(t, 10*time.Second, "an answered Internet probe", func() (bool, string) {
			var st webui.RouterStatus
			getJSON(t, l.lab, "/api/router", &st)
			in = st.WAN.Internet
			return in.Reachable, fmt.Sprintf("%+v", in)
		})
		if in.Probe != "ping "+svcISP || in.RTT <= 0 || in.Checked.IsZero() || in.Error != "" {
			t.Errorf("Internet %+v: want ping %s answered, with its time", in, svcISP)
		}
	})

	t.Run("the leased host on /api/devices", func(t *testing.T) {
		d := device(t, l, mac1)
		if d == nil || d.Address.String() != ev1["ip"] || d.State != webui.DeviceBound || d.Hostname != "h1-dhclient" || d.Static || d.InConfig {
			t.Fatalf("h1: %+v, want its lease %s bound, hostname h1-dhclient", d, ev1["ip"])
		}
		// Three 528-byte pings each way.
		if d.BytesOut < 3*528 || d.BytesIn < 3*528 {
			t.Errorf("h1 sent %d and received %d bytes, want 3×528 at least each way", d.BytesOut, d.BytesIn)
		}
		if p := device(t, l, "02:77:00:00:00:02"); p == nil || !p.Static || !p.InConfig || p.State != webui.DeviceReserved {
			t.Errorf("printer (the config's static lease, not taken): %+v", p)
		}
	})

	t.Run("make static in the browser survives a restart", func(t *testing.T) {
		ctx := browser(t, filepath.Join(l.dir, "chromium"))
		url := "http://" + l.box.Forward(t, "127.0.0.1:8080") + "/#/devices"
		row := `#dev-body tr[data-mac="` + mac1 + `"]`
		cells := `[...document.querySelector('` + row + `').cells].map(c => c.textContent)`
		browse(t, ctx, "the Devices page lists h1", chromedp.Navigate(url), poll(`!!document.querySelector('`+row+` button[data-action="static"]')`))
		if c := jsEval[[]string](t, ctx, cells); len(c) < 4 || c[0] != "h1-dhclient" || c[2] != ev1["ip"] || c[3] != "bound" {
			t.Errorf("h1's row %q, want h1-dhclient, its address %s, bound", c, ev1["ip"])
		}
		jsEval[bool](t, ctx, `document.querySelector('`+row+` button[data-action="static"]').click() || true`)
		browse(t, ctx, "made static", poll(`!document.querySelector('`+row+` button[data-action="static"]')`))
		for _, tc := range []struct {
			method, path string
			want         int
		}{
			{"POST", "/api/devices/" + mac1 + "/static", 204}, // again: nothing changes
			{"POST", "/api/devices/02:77:00:00:00:02/static", 409},
			{"DELETE", "/api/devices/02:77:00:00:00:02", 409},
			{"POST", "/api/devices/02:77:00:00:00:99/static", 404},
		} {
			if code, body := l.boxDo(tc.method, tc.path, nil); code != tc.want {
				t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, code, body, tc.want)
			}
		}
		l.stop()
		l.start("-config", l.cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json"))
		browse(t, ctx, "the Devices page after the restart", chromedp.Navigate("about:blank"), chromedp.Navigate(url),
			poll(`!!document.querySelector('`+row+`')`))
		if c := jsEval[[]string](t, ctx, cells); len(c) < 4 || c[2] != ev1["ip"] || c[3] != "bound static" {
			t.Errorf("h1's row after the restart %q, want bound and static at %s", c, ev1["ip"])
		}
		// Another device asking for h1's address does not get it.
		h3 := l.clients[2]
		h3.Udhcpc(t, "-q", "-r", ev1["ip"])
		if ev, _ := h3.WaitEvent(t, 0, "bound"); ev["ip"] == ev1["ip"] {
			t.Errorf("h3 was given h1's static %s", ev1["ip"])
		}
	})

	t.Run("forget", func(t *testing.T) {
		if code, body := l.boxDo("DELETE", "/api/devices/"+mac1, nil); code != 204 {
			t.Fatalf("forget h1: %d %s", code, body)
		}
		if d := device(t, l, mac1); d != nil {
			t.Errorf("h1 after forget: %+v", d)
		}
		if code, _ := l.boxDo("DELETE", "/api/devices/"+mac1, nil); code != 404 {
			t.Errorf("forget h1 again: %d, want 404", code)
		}
	})

	t.Run("no router in bridge mode", func(t *testing.T) {
		bridge := `{"version": 3, "mode": "bridge", "ports": [{"name": "wan", "interface": "p1"}, {"name": "lan1", "interface": "p2"},
			{"name": "lan2", "interface": "p3"}, {"name": "lan3", "interface": "p4"}], "hostPort": {}}`
		l.apply(t, bridge, true)
		for _, p := range []string{"/api/router", "/api/devices"} {
			if code, body := l.boxGet(p); code != 404 {
				t.Errorf("%s in bridge mode: %d %s, want 404", p, code, body)
			}
		}
	})
}

// browser is a headless chromium that sends the dashboard's password; its
// profile is in dir (chromium may still write there as it exits: a test's
// own TempDir would fail to be removed).
func browser(t *testing.T, dir string) context.Context {
	t.Helper()
	testenv.Require(t, "chromium")
	path, _ := exec.LookPath("chromium")
	actx, acancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(path), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 900))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("gokrazy:"+testPassword))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// browse runs actions in the browser within 30 s.
func browse(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// poll waits for a JavaScript condition (within browse's time).
func poll(cond string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(100*time.Millisecond))
}

// jsEval evaluates expr in the page.
func jsEval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// getJSON decodes the answer of an API GET.
func getJSON(t *testing.T, l *lab, path string, v any) {
	t.Helper()
	code, body := l.boxGet(path)
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, body)
	}
}

// device is the device of mac on /api/devices, nil if it is not listed.
func device(t *testing.T, l *svcLab, mac string) *webui.Device {
	t.Helper()
	var a webui.DevicesAnswer
	getJSON(t, l.lab, "/api/devices", &a)
	for i := range a.Devices {
		if a.Devices[i].MAC == mac {
			return &a.Devices[i]
		}
	}
	return nil
}
