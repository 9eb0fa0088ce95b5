package dhcpd

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// wireTemplate is a client message as bytes, with the offsets where a
// benchmark patches chaddr and the requested address (or ciaddr).
type wireTemplate struct {
	b        []byte
	addrOff  int // offset of the address to patch; -1: none
	chaddrAt int
}

const placeholder = "10.70.254.254"

func newTemplate(b *testing.B, m *dhcpv4.DHCPv4) wireTemplate {
	raw := m.ToBytes()
	tpl := wireTemplate{b: raw, chaddrAt: 28, addrOff: bytes.Index(raw, ip(placeholder))}
	return tpl
}

// packet returns the template with chaddr from n and the address a.
func (w wireTemplate) packet(buf []byte, n uint32, a netip.Addr) []byte {
	buf = append(buf[:0], w.b...)
	buf[w.chaddrAt] = 0x02
	binary.BigEndian.PutUint32(buf[w.chaddrAt+2:], n)
	if w.addrOff >= 0 && a.IsValid() {
		a4 := a.As4()
		copy(buf[w.addrOff:], a4[:])
	}
	return buf
}

// benchServer is a /16 LAN server (4096 leases) on a fake clock.
func benchServer(b *testing.B, edit func(*Config)) (*Server, *fakeClock) {
	cfg := testConfig()
	cfg.Subnet = netip.MustParsePrefix("10.70.0.0/16")
	cfg.NewLeasesPerSecond = -1
	if edit != nil {
		edit(&cfg)
	}
	s, clk := newTestServer(b, cfg)
	s.log = slog.New(slog.DiscardHandler) // measure the server, not the test log
	return s, clk
}

// handleWire is what Serve does with a packet: parse, handle, encode.
func handleWire(b *testing.B, s *Server, pkt []byte) *dhcpv4.DHCPv4 {
	req, err := dhcpv4.FromBytes(pkt)
	if err != nil {
		b.Fatal(err)
	}
	resp := s.Handle(req)
	if resp != nil {
		resp.ToBytes()
	}
	return resp
}

// BenchmarkLease: one new client per op completes DISCOVER and REQUEST
// (wire format in and out) and releases its lease, so the table stays
// full and every op reclaims the oldest released entry.
func BenchmarkLease(b *testing.B) {
	s, clk := benchServer(b, nil)
	disc := newTemplate(b, discover(b, macA))
	req := newTemplate(b, selecting(b, macA, placeholder))
	rel := newTemplate(b, release(b, macA, placeholder))
	rel.addrOff = 12 // ciaddr
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		clk.Add(time.Millisecond)
		n := uint32(i)
		offer := handleWire(b, s, disc.packet(buf, n, netip.Addr{}))
		if offer == nil {
			b.Fatalf("op %d: no offer", i)
		}
		a := ip4(offer.YourIPAddr)
		if ack := handleWire(b, s, req.packet(buf, n, a)); ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
			b.Fatalf("op %d: %s", i, summary(ack))
		}
		handleWire(b, s, rel.packet(buf, n, a))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "leases/s")
}

// BenchmarkRenew: 4096 known devices renewing in turn.
func BenchmarkRenew(b *testing.B) {
	s, clk := benchServer(b, nil)
	disc := newTemplate(b, discover(b, macA))
	req := newTemplate(b, selecting(b, macA, placeholder))
	ren := newTemplate(b, renew(b, macA, placeholder))
	ren.addrOff = 12
	var buf []byte
	addrs := make([]netip.Addr, 4096)
	for i := range addrs {
		offer := handleWire(b, s, disc.packet(buf, uint32(i), netip.Addr{}))
		addrs[i] = ip4(offer.YourIPAddr)
		handleWire(b, s, req.packet(buf, uint32(i), addrs[i]))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		clk.Add(time.Millisecond)
		n := i % len(addrs)
		if ack := handleWire(b, s, ren.packet(buf, uint32(n), addrs[n])); ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
			b.Fatalf("op %d: %s", i, summary(ack))
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renewals/s")
}

// BenchmarkDiscoverFlood: DISCOVERs from new MACs at a full table of
// offers, on a /24 (MaxLeases 253) and a /16 (MaxLeases 4096).
func BenchmarkDiscoverFlood(b *testing.B) {
	for _, bc := range []struct {
		name   string
		subnet string
	}{{"24", "10.70.0.0/24"}, {"16", "10.70.0.0/16"}} {
		b.Run(bc.name, func(b *testing.B) {
			s, clk := benchServer(b, func(c *Config) { c.Subnet = netip.MustParsePrefix(bc.subnet) })
			disc := newTemplate(b, discover(b, macA))
			var buf []byte
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				clk.Add(time.Microsecond)
				if handleWire(b, s, disc.packet(buf, uint32(i), netip.Addr{})) == nil {
					b.Fatalf("op %d: no offer", i)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "discovers/s")
		})
	}
}
