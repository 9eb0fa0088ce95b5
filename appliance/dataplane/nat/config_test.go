package nat

import (
	"net/netip"
	"strings"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"bad mac", func(c *Config) { c.LAN.MAC = c.LAN.MAC[:5] }, "lan: MAC"},
		{"multicast mac", func(c *Config) { c.WAN.MAC = hw([6]byte{1, 0, 0, 0, 0, 1}) }, "not a unicast"},
		{"same ids", func(c *Config) { c.WAN.ID = lanPort }, "same port id"},
		{"overlap", func(c *Config) { c.WAN.Addr = netip.MustParsePrefix("192.168.1.200/16") }, "overlap"},
		{"gateway off subnet", func(c *Config) { c.Gateway = ap("10.0.0.1") }, "gateway"},
		{"network address", func(c *Config) { c.LAN.Addr = netip.MustParsePrefix("192.168.1.0/24") }, "not a host address"},
		{"range", func(c *Config) { c.PortMin, c.PortMax = 3000, 2000 }, "port range"},
		{"forward target", func(c *Config) { c.Forwards[0].To = addrPort(remote, 80) }, "lan subnet"},
		{"forward overlap", func(c *Config) {
			c.Forwards = append(c.Forwards, PortForward{Proto: frame.ProtoUDP, Port: 5010, To: addrPort(ipA, 1)})
		}, "overlap"},
		{"forward proto", func(c *Config) { c.Forwards[0].Proto = 1 }, "protocol"},
		{"mtu", func(c *Config) { c.LAN.MTU = 100 }, "MTU"},
		{"mss", func(c *Config) { c.MSSClamp = 20 }, "mss"},
	} {
		cfg := testConfig()
		tc.mod(&cfg)
		_, err := New(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
		if verr := cfg.Validate(); verr == nil || err == nil || verr.Error() != err.Error() {
			t.Errorf("%s: Validate = %v, want New's error %v", tc.name, verr, err)
		}
	}
	cfg := testConfig()
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate(testConfig()) = %v", err)
	}
	cfg.WAN.Addr, cfg.Gateway = netip.Prefix{}, netip.Addr{}
	if _, err := New(cfg); err != nil {
		t.Errorf("unset WAN address (DHCP): %v", err)
	}
}

func TestUpdate(t *testing.T) {
	e := newEnv(t, nil)
	e.forward(LAN, fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.UDPPacket(1, 2, nil)), wanPort)
	cfg := e.r.Config()
	cfg.Forwards = nil
	if err := e.r.Update(cfg); err != nil {
		t.Fatal(err)
	}
	if n := e.r.CountConns(Filter{}); n != 1 {
		t.Errorf("update without address change dropped connections: %d", n)
	}
	if res := e.send(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 1, DstPort: 8080, Flags: frame.TCPSyn}, nil))); res.Action != routing.ToHost {
		t.Errorf("removed forward still used: %v", res.Action)
	}
	if err := e.r.SetWAN(netip.MustParsePrefix("198.18.0.2/24"), ap("198.18.0.1")); err != nil {
		t.Fatal(err)
	}
	if n := e.r.CountConns(Filter{}); n != 0 {
		t.Errorf("WAN address change kept %d connections", n)
	}
	cfg = e.r.Config()
	cfg.MaxConns = 5000
	if err := e.r.Update(cfg); err == nil {
		t.Errorf("changing MaxConns: no error")
	}
}
