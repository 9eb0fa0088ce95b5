package tuning

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnavailableOnVirtualAndVirtio(t *testing.T) {
	f := newFakeSys(t)
	f.veth("veth0")
	f.virtio("ens3")
	if err := os.Remove(filepath.Join(f.dir, "sys/module/e1000e/parameters/copybreak")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(f.dir, "sys/module/e1000e")); err != nil {
		t.Fatal(err)
	}
	port := func(name string) PortPlan {
		return PortPlan{Name: name, Data: true, ITR: "10000", RxRing: 1024, Offloads: map[string]bool{"rx-gro": false, "tx-tcp-segmentation": false}}
	}
	got := f.tuner().Apply(context.Background(), Plan{
		Placement: PlacementSame, Copybreak: ptr(uint32(0)),
		Ports: []PortPlan{port("veth0"), port("ens3")},
	})
	byKnob := map[string]Status{}
	for _, r := range got {
		if r.Status == StatusError {
			t.Errorf("error on a non-e1000e port: %v", r)
		}
		byKnob[r.Knob+" "+r.Target] = r.Status
	}
	for _, k := range []string{"copybreak e1000e (all ports)",
		"rings veth0", "itr veth0", "irq-affinity veth0-rx-0", "irq-affinity veth0-tx-0", "irq-affinity veth0",
		"rings ens3", "itr ens3", "irq-affinity ens3-rx-0", "irq-affinity ens3-tx-0", "irq-affinity ens3",
	} {
		if byKnob[k] != StatusUnavailable {
			t.Errorf("%s: status %q, want unavailable", k, byKnob[k])
		}
	}
	for _, k := range []string{"tx-tcp-segmentation veth0", "tx-tcp-segmentation ens3", "net.ipv4.conf.veth0.arp_ignore veth0"} {
		if byKnob[k] != StatusChanged {
			t.Errorf("%s: status %q, want changed", k, byKnob[k])
		}
	}
	if r := find(t, got, "itr", "ens3"); !strings.Contains(r.Message, `"virtio_net"`) {
		t.Errorf("itr on virtio: message %q should name the driver", r.Message)
	}
}

func TestITRAndRingRulesAtKnobLevel(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	pt, err := f.tuner().port("eth1")
	if err != nil {
		t.Fatal(err)
	}
	itr := knob[uint32]{&itrKnob{p: pt}}
	for _, bad := range []string{"2", "5", "9", "99", "100001", "1000000", "-1", "fast", ""} {
		if r := itr.Apply(bad); r.Status != StatusError {
			t.Errorf("itr Apply(%q) = %v, want error", bad, r)
		}
	}
	for _, tc := range []struct {
		want, after string
	}{
		{"100", "rx-usecs 10000 (100 ints/s)"},
		{"101", "rx-usecs 10000 (100 ints/s)"}, // kept as itr 100 by e1000e
		{"30000", "rx-usecs 33 (30303 ints/s)"},
		{"100000", "rx-usecs 10 (100000 ints/s)"},
		{"simplified", "rx-usecs 4 (simplified)"},
		{"dynamic", "rx-usecs 1 (dynamic)"},
	} {
		r := itr.Apply(tc.want)
		if r.Status == StatusError || r.After != tc.after {
			t.Errorf("itr Apply(%q) = %v, want after %q", tc.want, r, tc.after)
		}
		if r2 := itr.Apply(tc.want); r2.Status != StatusOK {
			t.Errorf("itr Apply(%q) twice = %v, want ok", tc.want, r2)
		}
	}
	// The fake itself enforces e1000e's EINVAL values (the driver's rules).
	for _, u := range []uint32{2, 5, 9, 10001} {
		if err := f.et.SetCoalesce("eth1", u); err == nil {
			t.Errorf("fake SetCoalesce(%d) accepted", u)
		}
	}

	rings := knob[ringWant]{&ringKnob{p: pt}}
	for _, bad := range []string{"rx=5000", "rx=32", "tx=0", "rx", "rx=1,tx=2", "mini=100", ""} {
		if r := rings.Apply(bad); r.Status != StatusError {
			t.Errorf("rings Apply(%q) = %v, want error", bad, r)
		}
	}
	r := rings.Apply("rx=100")
	if r.Status != StatusChanged || r.After != "rx 104 tx 256" || !strings.Contains(r.Message, "rx 100 rounded up to 104") {
		t.Errorf("rings Apply(rx=100) = %v", r)
	}
	if r := rings.Apply("rx=100"); r.Status != StatusOK {
		t.Errorf("rings Apply(rx=100) twice = %v, want ok", r)
	}
}

func TestChecksumTurnsTSOOff(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	tu := f.tuner()
	got := tu.Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", Offloads: map[string]bool{"tx-checksum-ip-generic": false}},
	}})
	r := find(t, got, "tx-checksum-ip-generic", "eth1")
	if r.Status != StatusChanged || !strings.Contains(r.Message, "tx-tcp-segmentation on->off") ||
		!strings.Contains(r.Message, "tx-tcp6-segmentation on->off") {
		t.Errorf("checksum off: %v, want a note that TSO went off too", r)
	}
	// Restoring both in one plan: checksum first, then TSO.
	got = tu.Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", Offloads: map[string]bool{"tx-tcp-segmentation": true, "tx-checksum-ip-generic": true}},
	}})
	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "manual"},
		{"tx-checksum-ip-generic", "eth1", "changed", "on"},
		{"tx-tcp-segmentation", "eth1", "ok", "on"}, // came back with the checksum (still wanted)
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("restore (-want +got):\n%s\n%s", diff, reportLines(got))
	}
}

func TestFeatureVerificationCatchesLaterChanges(t *testing.T) {
	f := newFakeSys(t)
	n := f.e1000e("eth1", 27)
	// A driver quirk: turning tx-nocache-copy on turns GRO back on.
	n.quirk = func(fs map[string]*fakeFeature) {
		if fs["tx-nocache-copy"].active {
			fs["rx-gro"].active = true
		}
	}
	got := f.tuner().Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", Offloads: map[string]bool{"rx-gro": false, "tx-nocache-copy": true}},
	}})
	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "manual"},
		{"rx-gro", "eth1", "changed", "off"},
		{"tx-nocache-copy", "eth1", "changed", "on"},
		{"rx-gro", "eth1", "error", "on"},
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, reportLines(got))
	}
}

func TestFixedFeatureUnavailable(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	got := f.tuner().Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", Offloads: map[string]bool{"rx-lro": true, "rx-vlan-filter": true, "no-such-feature": false}},
	}})
	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "manual"},
		{"no-such-feature", "eth1", "unavailable", ""},
		{"rx-lro", "eth1", "unavailable", "off"},
		{"rx-vlan-filter", "eth1", "ok", "on"}, // fixed on, as wanted
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, reportLines(got))
	}
	if m := find(t, got, "rx-lro", "eth1").Message; m != `rx-lro is fixed off on eth1 (driver "e1000e")` {
		t.Errorf("rx-lro message %q", m)
	}
}

func TestIRQDiscovery(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	f.e1000e("eth2", 30)
	// eth2's vectors are missing from /proc/interrupts (as if renamed):
	// the msi_irqs fallback finds them by their /proc/irq/N/<name> dirs.
	lines := strings.Split(f.read("proc/interrupts"), "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, "eth2") })
	f.file("proc/interrupts", strings.Join(lines, "\n")+"\n")
	// eth1's vectors moved already: effective follows.
	f.file("proc/irq/27/effective_affinity_list", "0\n")
	got := f.tuner().Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", IRQ: map[Vector]int{VectorRX: 0}},
		{Name: "eth2", IRQ: map[Vector]int{VectorRX: 1, VectorOther: 0}},
	}})
	want := []brief{
		{"cpu-plan", "cpus 0-1", "ok", "manual"},
		{"irq-affinity", "eth1-rx-0", "changed", "irq 27 cpus 0 effective 0"},
		{"irq-affinity", "eth2-rx-0", "changed", "irq 30 cpus 1 effective 1"},
		{"irq-affinity", "eth2", "changed", "irq 32 cpus 0 effective 1"},
	}
	if diff := cmp.Diff(want, briefs(got)); diff != "" {
		t.Fatalf("(-want +got):\n%s\n%s", diff, reportLines(got))
	}
	if m := got[1].Message; m != "" {
		t.Errorf("eth1-rx-0 message %q, want none (effective moved)", m)
	}
	if m := got[2].Message; !strings.Contains(m, "found through msi_irqs") {
		t.Errorf("eth2-rx-0 message %q, want the fallback named", m)
	}
	if m := got[3].Message; !strings.Contains(m, "effective_affinity_list is still 1") {
		t.Errorf("eth2 message %q, want the effective-affinity note", m)
	}

	// An e1000e port that is down has no vectors: an error, not unavailable.
	for _, irq := range []string{"30", "31", "32"} {
		os.RemoveAll(filepath.Join(f.dir, "proc/irq", irq))
	}
	got = f.tuner().Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth2", IRQ: map[Vector]int{VectorRX: 1}},
	}})
	if r := find(t, got, "irq-affinity", "eth2-rx-0"); r.Status != StatusError || !strings.Contains(r.Message, "is eth2 up?") {
		t.Errorf("down port: %v, want an error asking whether it is up", r)
	}
}

func TestQuietPortWithAddress(t *testing.T) {
	f := newFakeSys(t)
	f.e1000e("eth1", 27)
	f.e1000e("eth2", 30)
	f.addrs["eth1"] = []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24"), netip.MustParsePrefix("fe80::1/64")}
	f.addrs["eth2"] = []netip.Prefix{netip.MustParsePrefix("fe80::2/64"), netip.MustParsePrefix("2001:db8::2/64")}
	got := f.tuner().Apply(context.Background(), Plan{Placement: PlacementManual, Ports: []PortPlan{
		{Name: "eth1", Data: true}, {Name: "eth2", Data: true},
	}})
	for _, tc := range []struct {
		knob   string
		status Status
		file   string
		value  string
	}{
		{"net.ipv4.conf.eth1.arp_ignore", StatusError, "proc/sys/net/ipv4/conf/eth1/arp_ignore", "0"},
		{"net.ipv6.conf.eth1.disable_ipv6", StatusChanged, "proc/sys/net/ipv6/conf/eth1/disable_ipv6", "1"},
		{"net.ipv4.conf.eth2.arp_ignore", StatusChanged, "proc/sys/net/ipv4/conf/eth2/arp_ignore", "8"},
		{"net.ipv6.conf.eth2.disable_ipv6", StatusError, "proc/sys/net/ipv6/conf/eth2/disable_ipv6", "0"},
	} {
		var r Report
		for _, x := range got {
			if x.Knob == tc.knob {
				r = x
			}
		}
		if r.Status != tc.status {
			t.Errorf("%s: %v, want %s", tc.knob, r, tc.status)
		}
		if v := f.read(tc.file); v != tc.value {
			t.Errorf("%s = %q, want %q", tc.file, v, tc.value)
		}
		if tc.status == StatusError && !strings.Contains(r.Message, "has kernel address") {
			t.Errorf("%s message %q, want the address named", tc.knob, r.Message)
		}
	}
}

func TestBridgeNetfilter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(f *fakeSys)
		status  Status
		message string
	}{
		{"not compiled in", func(f *fakeSys) {}, StatusUnavailable, noBridgeNF},
		{"no kernel config", func(f *fakeSys) { os.Remove(filepath.Join(f.dir, "proc/config.gz")) }, StatusUnavailable, noBridgeNF},
		{"module not loaded", func(f *fakeSys) { f.kernelConfig("CONFIG_BRIDGE_NETFILTER=m\n") }, StatusUnavailable,
			"br_netfilter is not loaded; bridged traffic bypasses netfilter (effectively off)"},
		{"present", func(f *fakeSys) {
			for _, k := range bridgeNFKeys {
				f.file("proc/sys/net/bridge/"+k, "1\n")
			}
		}, StatusChanged, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			tc.setup(f)
			got := f.tuner().Apply(context.Background(), Plan{BridgeNetfilterOff: true})
			if len(got) != 4 { // cpu-plan + 3
				t.Fatalf("got %d reports: %v", len(got), got)
			}
			for _, r := range got[1:] {
				if r.Status != tc.status || r.Message != tc.message {
					t.Errorf("%s: status %s message %q, want %s %q", r.Knob, r.Status, r.Message, tc.status, tc.message)
				}
			}
			if tc.status == StatusChanged {
				for _, k := range bridgeNFKeys {
					if v := f.read("proc/sys/net/bridge/" + k); v != "0" {
						t.Errorf("%s = %q, want 0", k, v)
					}
				}
			}
		})
	}
}
