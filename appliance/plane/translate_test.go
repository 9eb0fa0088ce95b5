package plane

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"e1kbox/appliance/config"
	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/nat"
	"e1kbox/appliance/services/wanclient"
	"e1kbox/rules"
	"e1kbox/tuning"
)

func TestDataplaneConfig(t *testing.T) {
	parse := func(t *testing.T, s string) *config.Config {
		t.Helper()
		c, err := config.Parse([]byte(s))
		if err != nil {
			t.Fatalf("config.Parse: %v", err)
		}
		return c
	}
	cpu := tuning.CPUPlan{Placement: tuning.PlacementSplit, CPUs: tuning.CPUSet{0, 1}, Ports: []tuning.PortCPU{{Port: "eth1", IRQCPU: 0, WorkerCPU: 1}}}
	t.Run("bridge", func(t *testing.T) {
		c := parse(t, `{"version": 2, "mode": "bridge",
			"ports": [{"name": "lan", "interface": "eth1", "mtu": 9000}, {"name": "off", "interface": "eth2", "enabled": false},
			          {"name": "dmz", "interface": "eth3"}],
			"hostPort": {"addresses": ["192.168.1.2/24"]},
			"bridge": {"fdbAging": "10s", "fdbSize": 1024, "static": [{"mac": "02:00:00:00:00:01", "port": "dmz", "vlan": 7}]},
			"rules": {"policy": {"forward": "drop"}, "rules": [{"l4proto": "tcp", "dport": "22", "action": "accept"}]}}`)
		got, err := dataplaneConfig(c, cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := &dataplane.Config{
			Mode:     dataplane.ModeBridge,
			FastPath: dataplane.FastPathAuto,
			Ports:    []dataplane.Port{{Name: "lan", Interface: "eth1", MTU: 9000}, {Name: "dmz", Interface: "eth3", MTU: 1500}},
			HostPort: &dataplane.HostPort{Name: "host", Interface: "e1khost0", Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.1.2/24")}},
			Bridge: dataplane.Bridge{AgingTime: 10 * time.Second, FDBSize: 1024,
				Static: []dataplane.StaticEntry{{MAC: [6]byte{2, 0, 0, 0, 0, 1}, VLAN: 7, Port: "dmz"}}},
			Rules: &c.Rules,
			CPU:   cpu,
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
			cmp.Comparer(func(a, b *rules.Ruleset) bool { return rules.Format(a) == rules.Format(b) })); diff != "" {
			t.Errorf("dataplaneConfig (-want +got):\n%s", diff)
		}
		if err := got.Check(); err != nil {
			t.Errorf("translated config does not validate: %v", err)
		}
	})
	t.Run("nat", func(t *testing.T) {
		c := parse(t, `{"version": 2, "mode": "nat",
			"ports": [{"name": "wan", "interface": "eth1", "role": "wan", "addresses": ["203.0.113.2/24"]},
			          {"name": "lan", "interface": "eth2", "role": "lan", "addresses": ["192.168.1.1/24"], "mtu": 9000},
			          {"name": "lan2", "interface": "eth3", "role": "lan", "mtu": 4000},
			          {"name": "off", "interface": "eth4", "role": "lan", "enabled": false}],
			"hostPort": {"addresses": ["192.168.1.2/24"]},
			"nat": {"gateway": "203.0.113.1", "masqueradePorts": "20000-29999", "mssClamp": false,
			        "wan": {"vlan": {"id": 7, "pcp": 1, "controlPCP": 6}},
			        "conntrack": {"size": 4096, "timeouts": {"udp": "2s", "udpStream": "1500ms", "tcpEstablished": "1h"}},
			        "forwards": [{"proto": "tcp", "wanPorts": "443", "lanHost": "192.168.1.10"},
			                     {"proto": "udp", "wanPorts": "6000-6010", "lanHost": "192.168.1.11", "lanPort": 7000}]}}`)
		got, err := dataplaneConfig(c, cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		to := nat.Timeouts{TCPSynSent: 120, TCPSynRecv: 60, TCPEstablished: 3600, TCPFinWait: 120, TCPCloseWait: 60,
			TCPLastAck: 30, TCPTimeWait: 120, TCPClose: 10, UDPUnreplied: 2, UDPAssured: 2, ICMP: 30, Generic: 600}
		want := &dataplane.Config{
			Mode:     dataplane.ModeNAT,
			FastPath: dataplane.FastPathAuto,
			Ports: []dataplane.Port{{Name: "wan", Interface: "eth1", MTU: 1500, Role: dataplane.RoleWAN},
				{Name: "lan", Interface: "eth2", MTU: 9000, Role: dataplane.RoleLAN}, {Name: "lan2", Interface: "eth3", MTU: 4000, Role: dataplane.RoleLAN}},
			HostPort: &dataplane.HostPort{Name: "host", Interface: "e1khost0", MTU: 4000, Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.1.2/24")}},
			Bridge:   dataplane.Bridge{AgingTime: 300 * time.Second, FDBSize: 8192},
			NAT: &dataplane.NAT{
				LANAddr: netip.MustParsePrefix("192.168.1.1/24"), WANAddr: netip.MustParsePrefix("203.0.113.2/24"),
				Gateway: netip.MustParseAddr("203.0.113.1"), PortMin: 20000, PortMax: 29999, MaxConns: 4096,
				Timeouts: to, MSSClamp: -1, IPv6: true, WANVLAN: dataplane.WANVLAN{ID: 7, PCP: 1, ControlPCP: 6},
				Forwards: []nat.PortForward{{Proto: 6, Port: 443, PortEnd: 443, To: netip.MustParseAddrPort("192.168.1.10:443")},
					{Proto: 17, Port: 6000, PortEnd: 6010, To: netip.MustParseAddrPort("192.168.1.11:7000")}},
			},
			Rules: &c.Rules,
			CPU:   cpu,
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
			cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b }),
			cmp.Comparer(func(a, b *rules.Ruleset) bool { return rules.Format(a) == rules.Format(b) })); diff != "" {
			t.Errorf("dataplaneConfig (-want +got):\n%s", diff)
		}
		if err := got.Check(); err != nil {
			t.Errorf("translated config does not validate: %v", err)
		}
	})
	t.Run("bridge vlans", func(t *testing.T) {
		got, err := dataplaneConfig(parse(t, `{"version": 2, "ports": [{"name": "p1", "interface": "eth1", "vlans": {"native": 10, "allowed": [20, 30]}},
			{"name": "p2", "interface": "eth2"}]}`), cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&dataplane.VLANs{Native: 10, Allowed: []uint16{20, 30}}, got.Ports[0].VLANs); diff != "" || got.Ports[1].VLANs != nil {
			t.Errorf("ports[0].vlans (-want +got):\n%s; ports[1].vlans %+v", diff, got.Ports[1].VLANs)
		}
	})
	t.Run("what the box refused at apply time is a validation error now", func(t *testing.T) {
		for _, tt := range []struct{ name, cfg, path string }{
			{"vlans in nat mode", `{"version": 2, "mode": "nat", "ports": [{"name": "wan", "interface": "eth1", "role": "wan", "addresses": ["203.0.113.2/24"]},
			{"name": "lan", "interface": "eth2", "role": "lan", "addresses": ["192.168.1.1/24"], "vlans": {"native": 1}}], "nat": {"gateway": "203.0.113.1"}}`, "ports[1].vlans"},
			{"two LAN addresses", `{"version": 2, "mode": "nat", "ports": [{"name": "wan", "interface": "eth1", "role": "wan", "addresses": ["203.0.113.2/24"]},
			{"name": "lan", "interface": "eth2", "role": "lan", "addresses": ["192.168.1.1/24"]},
			{"name": "lan2", "interface": "eth3", "role": "lan", "addresses": ["192.168.1.3/24"]}], "nat": {"gateway": "203.0.113.1"}}`, "ports[2].addresses[0]"},
		} {
			err := parse(t, tt.cfg).Validate(config.Env{})
			if fe := config.AsErrors(err); len(fe) != 1 || fe[0].Path != tt.path {
				t.Errorf("%s: Validate = %v, want one error at %s", tt.name, err, tt.path)
			}
		}
	})
}

// validConfigSeeds are the configs the project ships: the config
// package's examples, the factory config in config.json, and the JSON
// examples of docs/config.md.
func validConfigSeeds(t testing.TB) [][]byte {
	t.Helper()
	var seeds [][]byte
	for _, f := range []string{"../config/testdata/example.json", "../config/testdata/v1.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	var inst struct {
		PackageConfig map[string]struct{ ExtraFileContents map[string]string }
	}
	b, err := os.ReadFile("../../config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &inst); err != nil {
		t.Fatal(err)
	}
	seeds = append(seeds, []byte(inst.PackageConfig["e1kbox/appliance"].ExtraFileContents["/etc/e1kbox/factory.json"]))
	// The home router's instance: its factory config is NAT mode behind
	// an ISP modem (WAN by DHCP, DHCP and DNS on the LAN).
	b, err = os.ReadFile("../../examples/router/config.json")
	if err != nil {
		t.Fatal(err)
	}
	inst.PackageConfig = nil
	if err := json.Unmarshal(b, &inst); err != nil {
		t.Fatal(err)
	}
	seeds = append(seeds, []byte(inst.PackageConfig["e1kbox/appliance"].ExtraFileContents["/etc/e1kbox/factory.json"]))
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(doc), "```json")[1:] {
		if js, _, ok := strings.Cut(block, "```"); ok && strings.Contains(js, `"version"`) {
			seeds = append(seeds, []byte(js))
		}
	}
	return seeds
}

// runs checks the promise of package config: a config that validates is
// one the dataplane runs (the derived configuration passes the engine's
// own checks, the router's included).
func runs(t testing.TB, b []byte) {
	c, err := config.Parse(b)
	if err != nil || c.Validate(config.Env{}) != nil {
		return
	}
	cpu := tuning.CPUPlan{Placement: tuning.PlacementSplit, CPUs: tuning.CPUSet{0, 1}}
	leases := []*wanclient.Lease{nil}
	if c.Mode == config.ModeNAT && c.NAT.WANDHCP {
		// What an ISP may hand out, within limits the router takes.
		leases = append(leases, &wanclient.Lease{Addr: netip.MustParsePrefix("100.64.3.7/22"), Gateway: netip.MustParseAddr("100.64.0.1"), MTU: 1492},
			&wanclient.Lease{Addr: netip.MustParsePrefix("100.64.3.7/22"), MTU: 100})
	}
	for _, l := range leases {
		d, err := dataplaneConfig(c, cpu, l)
		if err != nil {
			t.Fatalf("a valid config does not translate (lease %+v): %v\n%s", l, err, b)
		}
		if err := d.Check(); err != nil && !lanOverlaps(c, l) {
			t.Fatalf("a valid config is refused by the dataplane (lease %+v): %v\n%s", l, err, b)
		}
	}
}

// lanOverlaps reports whether lease l's subnet overlaps the LAN's (the
// router cannot run that: the dashboard says so).
func lanOverlaps(c *config.Config, l *wanclient.Lease) bool {
	lan := c.RouterLAN()
	return l != nil && lan.IsValid() && l.Addr.Masked().Overlaps(lan.Masked())
}

func TestEveryValidConfigRuns(t *testing.T) {
	seeds := validConfigSeeds(t)
	valid := 0
	for _, b := range seeds {
		if c, err := config.Parse(b); err == nil && c.Validate(config.Env{}) == nil {
			valid++
		}
		runs(t, b)
	}
	if valid < 4 {
		t.Errorf("only %d of %d shipped configs validate; the seeds should be valid", valid, len(seeds))
	}
}

// FuzzValidConfigRuns mutates the shipped configs: whatever validates must
// run.
func FuzzValidConfigRuns(f *testing.F) {
	for _, b := range validConfigSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { runs(t, b) })
}

// TestRouterFactory: the home router's factory config (examples/router)
// validates and runs the router services with the WAN by DHCP.
func TestRouterFactory(t *testing.T) {
	seeds := validConfigSeeds(t)
	c, err := config.Parse(seeds[3])
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(config.Env{}); err != nil {
		t.Fatalf("the router's factory config: %v", err)
	}
	if c.Mode != config.ModeNAT || !c.NAT.WANDHCP || !c.DHCP.IsEnabled() || !c.DNS.IsEnabled() || c.HostPort == nil {
		t.Errorf("router factory: mode %s, wanDHCP %v, DHCP %v, DNS %v, host port %v", c.Mode, c.NAT.WANDHCP, c.DHCP.IsEnabled(), c.DNS.IsEnabled(), c.HostPort)
	}
}
