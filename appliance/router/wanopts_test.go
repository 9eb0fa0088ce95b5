package router

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"e1kbox/appliance/config"
	"e1kbox/appliance/services/dhcp6c"
	"e1kbox/appliance/services/wanclient"
)

const wanOptsConfig = `{"version": 3, "mode": "nat",
	"ports": [{"name": "wan", "interface": "eth0", "role": "wan"},
		{"name": "lan1", "interface": "eth1", "role": "lan", "addresses": ["192.168.7.1/24"]}],
	"hostPort": {"name": "host", "interface": "e1khost0", "addresses": ["192.168.7.2/24"]},
	"ipv6": {"enabled": true},
	"nat": {"wanDHCP": true, "wan": {
		"dhcp": {"vendorClass": "isp-vendor", "clientID": "00:69:73:70", "userClass": ["iptv", "voip"], "hostname": "fritz",
			"options": [{"code": 224, "hex": "dead"}]},
		"dhcpv6": {"userClass": ["iptv"], "vendorClass": {"enterprise": 3561, "data": ["a", "bc"]},
			"options": [{"code": 1234, "hex": "01:02"}]}}}}`

func parse(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestWANClientOptions: nat.wan.dhcp and nat.wan.dhcpv6 reach the
// clients' configs (the config's hostname over the box's), which the
// clients accept; without them the box's hostname and the default client
// ID are used; the binding key changes with the options only.
func TestWANClientOptions(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	r := &Router{cfg: parse(t, wanOptsConfig), opts: Options{State: "/perm/state", Hostname: "box"}}
	got, key := r.wanClientConfig("eth0", mac)
	want := wanclient.Config{Interface: "eth0", MAC: mac, Hostname: "fritz", ClientID: []byte{0, 'i', 's', 'p'},
		LeaseFile: "/perm/state/wan-lease.json", VendorClass: "isp-vendor", UserClass: []string{"iptv", "voip"},
		Options: []wanclient.Option{{Code: 224, Value: []byte{0xde, 0xad}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DHCPv4 client config (-want +got):\n%s", diff)
	}
	if _, err := wanclient.New(got, nil); err != nil {
		t.Errorf("the DHCPv4 client refuses its config: %v", err)
	}
	c6 := dhcp6c.Config{Interface: "eth0", MAC: mac}
	key6 := r.dhcp6Options(&c6)
	want6 := dhcp6c.Config{Interface: "eth0", MAC: mac, UserClass: [][]byte{[]byte("iptv")},
		VendorClass: &dhcp6c.VendorClass{Enterprise: 3561, Data: [][]byte{[]byte("a"), []byte("bc")}},
		Options:     []dhcp6c.Option{{Code: 1234, Value: []byte{1, 2}}}}
	if diff := cmp.Diff(want6, c6, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("DHCPv6 client config (-want +got):\n%s", diff)
	}
	if _, err := dhcp6c.New(c6, nil); err != nil {
		t.Errorf("the DHCPv6 client refuses its config: %v", err)
	}

	// Another DNS setting keeps both keys; new options change them.
	r2 := &Router{cfg: parse(t, wanOptsConfig), opts: r.opts}
	r2.cfg.DNS.CacheSize = 7
	if _, k := r2.wanClientConfig("eth0", mac); k != key {
		t.Errorf("DHCPv4 key %q, want %q", k, key)
	}
	if k := r2.dhcp6Options(&dhcp6c.Config{}); k != key6 {
		t.Errorf("DHCPv6 key %q, want %q", k, key6)
	}
	r2.cfg.NAT.WAN.DHCP.UserClass = []string{"iptv"}
	r2.cfg.NAT.WAN.DHCPv6.VendorClass.Data = []string{"a"}
	if _, k := r2.wanClientConfig("eth0", mac); k == key {
		t.Errorf("DHCPv4 key %q kept after a new user class", k)
	}
	if k := r2.dhcp6Options(&dhcp6c.Config{}); k == key6 {
		t.Errorf("DHCPv6 key %q kept after a new vendor class", k)
	}

	plain := &Router{cfg: parse(t, `{"version": 3, "mode": "nat",
		"ports": [{"name": "wan", "interface": "eth0", "role": "wan"},
			{"name": "lan1", "interface": "eth1", "role": "lan", "addresses": ["192.168.7.1/24"]}],
		"nat": {"wanDHCP": true}}`), opts: r.opts}
	got, _ = plain.wanClientConfig("eth0", mac)
	want = wanclient.Config{Interface: "eth0", MAC: mac, Hostname: "box", LeaseFile: "/perm/state/wan-lease.json"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DHCPv4 client config without options (-want +got):\n%s", diff)
	}
	c6 = dhcp6c.Config{}
	plain.dhcp6Options(&c6)
	if diff := cmp.Diff(dhcp6c.Config{}, c6, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("DHCPv6 client config without options (-want +got):\n%s", diff)
	}
}
