package dhcpd

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// fuzzServer is shared by all inputs of a fuzzing process, so state builds
// up across them the way it does on a LAN: a small table (MaxLeases 8), a
// /26 pool, a static lease and an exclusion, devices on three ports (by
// their MAC's last byte) of which some use their address (by its last
// byte and the MAC's).
var fuzzServer = sync.OnceValues(func() (*Server, *fakeClock) {
	cfg := testConfig()
	cfg.Subnet = netip.MustParsePrefix("10.70.0.0/26")
	cfg.MaxLeases = 8
	cfg.Static = []Static{{MAC: hw(macS), IP: netip.MustParseAddr("10.70.0.50"), Hostname: "printer"}}
	cfg.Exclude = []netip.Addr{netip.MustParseAddr("10.70.0.2")}
	clk := newClock()
	cfg.PortOf = func(m net.HardwareAddr) string { return [...]string{"lan1", "lan2", ""}[m[5]%3] }
	cfg.Activity = func(a netip.Addr, m net.HardwareAddr) time.Time {
		if (a.As4()[3]+m[5])%4 == 0 {
			return clk.Now()
		}
		return time.Time{}
	}
	s, err := newServer(cfg, slog.New(slog.DiscardHandler), clk.Now)
	if err != nil {
		panic(err)
	}
	return s, clk
})

var fuzzMu sync.Mutex

// FuzzHandle feeds raw packets through dhcpv4.FromBytes to Handle: it must
// never panic, every reply must encode and decode again, and the table
// must stay consistent and within its bound whatever came before. The
// packet's last byte moves the clock (0..255 s) so offers, leases and
// quarantines expire along the way.
func FuzzHandle(f *testing.F) {
	for _, m := range []*dhcpv4.DHCPv4{
		discover(f, macA),
		discover(f, macB, requested("10.70.0.9"), clientID(1, 2, 3), hostname("Box One")),
		selecting(f, macA, "10.70.0.3"),
		selecting(f, macS, "10.70.0.50"),
		initReboot(f, macC, "10.70.0.20"),
		initReboot(f, macC, "192.168.0.1"),
		renew(f, macA, "10.70.0.3"),
		renew(f, macD, "10.70.0.4", giaddr("10.70.0.62")),
		release(f, macA, "10.70.0.3"),
		decline(f, macA, "10.70.0.3"),
		inform(f, macD, "10.70.0.30"),
		msg(f, dhcpv4.MessageTypeRequest, macA, serverID("10.70.0.9"), requested("10.70.0.3")),
	} {
		f.Add(m.ToBytes())
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 6, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzMu.Lock()
		defer fuzzMu.Unlock()
		s, clk := fuzzServer()
		if len(data) > 0 {
			clk.Add(time.Duration(data[len(data)-1]) * time.Second)
		}
		req, err := dhcpv4.FromBytes(data)
		if err != nil {
			return
		}
		if resp := s.Handle(req); resp != nil {
			if _, err := dhcpv4.FromBytes(resp.ToBytes()); err != nil {
				t.Fatalf("reply does not decode: %v\n%s", err, resp.Summary())
			}
			ReplyAddr(req, resp)
			if resp.OpCode != dhcpv4.OpcodeBootReply || resp.TransactionID != req.TransactionID {
				t.Fatalf("reply with op %v xid %v to xid %v", resp.OpCode, resp.TransactionID, req.TransactionID)
			}
			if y := ip4(resp.YourIPAddr); y.IsValid() && !s.pol.host(y) {
				t.Fatalf("offered %v, not a host address of the pool's subnet", y)
			}
		}
		switch data[0] % 16 {
		case 0:
			s.sweep()
		case 1:
			s.prove()
		}
		checkInvariants(t, s)
		s.Leases()
		s.Names()
		s.Stats()
	})
}
