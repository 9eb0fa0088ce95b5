package dhcp6c

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/appliance/services/dhcpclient"
)

// rawLink is a fakeLink that also keeps the frames the client writes.
type rawLink struct {
	*fakeLink
	raw chan []byte
}

func (r *rawLink) Write(b []byte, dst net.HardwareAddr) error {
	select {
	case r.raw <- append([]byte(nil), b...):
	default:
	}
	return r.fakeLink.Write(b, dst)
}

// TestSessionTransport: a client over a transport of its own (Config.Open,
// a PPPoE session's) sends from Config.LinkLocal (IPv6CP's) to ff02::1:2
// and takes the server's replies to that address, not to the MAC's.
func TestSessionTransport(t *testing.T) {
	ll := netip.MustParseAddr("fe80::1c:2d:3e:4f")
	link := &rawLink{fakeLink: newFakeLink(), raw: make(chan []byte, 64)}
	opened := 0
	cfg := Config{Interface: "ppp-wan", MAC: boxMAC, LinkLocal: ll,
		Open: func() (dhcpclient.Transport, int, error) { opened++; return link, 1492, nil }}
	f := startFakeWith(t, cfg, link.fakeLink, false)
	sol := f.sent(dhcpv6.MessageTypeSolicit, 2*time.Second)
	if opened != 1 {
		t.Fatalf("Config.Open called %d times, want once", opened)
	}
	raw := <-link.raw
	var d dhcpclient.Frame
	if d, _ = dhcpclient.DecodeIPv6(raw, allServersMAC, allServers, serverPort, false); d.SrcIP != ll || d.DstIP != allServers {
		t.Fatalf("Solicit from %v to %v, want from %v to %v", d.SrcIP, d.DstIP, ll, allServers)
	}
	if got := f.c.LinkLocal(); got != ll {
		t.Errorf("LinkLocal() = %v, want %v", got, ll)
	}
	adv := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeAdvertise, TransactionID: sol.TransactionID}
	adv.AddOption(dhcpv6.OptClientID(sol.Options.ClientID()))
	adv.AddOption(dhcpv6.OptServerID(f.server))
	adv.AddOption(iapd(iana.StatusSuccess))
	// To the MAC's link-local address: not ours on this link.
	link.in <- replyFrame(adv.ToBytes(), nil)
	// To IPv6CP's: taken.
	link.in <- replyFrame(adv.ToBytes(), func(fr *dhcpclient.Frame) { fr.DstIP = ll })
	req := f.sent(dhcpv6.MessageTypeRequest, 3*time.Second)
	f.answer(req, dhcpv6.MessageTypeReply, iapd(iana.StatusSuccess))
	// The answer went to the MAC's address: resent to IPv6CP's.
	rep := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: req.TransactionID}
	rep.AddOption(dhcpv6.OptClientID(req.Options.ClientID()))
	rep.AddOption(dhcpv6.OptServerID(f.server))
	rep.AddOption(iapd(iana.StatusSuccess))
	link.in <- replyFrame(rep.ToBytes(), func(fr *dhcpclient.Frame) { fr.DstIP = ll })
	ch := f.change(3 * time.Second)
	if ch.new == nil || len(ch.new.Prefixes) != 1 || ch.new.Prefixes[0].Prefix != delegation {
		t.Fatalf("lease %+v, want %v delegated", ch.new, delegation)
	}
	if n := f.c.Stats().Ignored[dhcpclient.DropNotForUs]; n != 2 {
		t.Errorf("%s: %d, want the 2 frames to the MAC's address", dhcpclient.DropNotForUs, n)
	}
}

// TestSolicitKept: a kept lease is confirmed with a REBIND (its prefix in
// use at once), or with SolicitKept asked for again in a SOLICIT, its
// prefix the hint, and not used before a server gives it.
func TestSolicitKept(t *testing.T) {
	for _, tc := range []struct {
		name        string
		solicitKept bool
		first       dhcpv6.MessageType
	}{
		{"rebind", false, dhcpv6.MessageTypeRebind},
		{"solicit with the kept prefix as hint", true, dhcpv6.MessageTypeSolicit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Interface: "wan", MAC: boxMAC, StateDir: dir, SolicitKept: tc.solicitKept}
			c, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			kept := &Lease{Prefixes: []Prefix{{Prefix: delegation, Preferred: now.Add(time.Hour), Valid: now.Add(2 * time.Hour)}},
				ServerID: (&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ispMAC}).ToBytes(), Obtained: now,
				T1: now.Add(time.Hour), T2: now.Add(90 * time.Minute)}
			if err := saveLease(dir, c.duid, cfg.iaid(), kept); err != nil {
				t.Fatal(err)
			}
			f := startFake(t, cfg)
			m := f.sent(tc.first, 3*time.Second)
			var hints []netip.Prefix
			for _, pd := range m.Options.IAPD() {
				for _, p := range pd.Options.Prefixes() {
					if pfx, ok := netip.AddrFromSlice(p.Prefix.IP); ok {
						ones, _ := p.Prefix.Mask.Size()
						hints = append(hints, netip.PrefixFrom(pfx, ones))
					}
				}
			}
			if len(hints) != 1 || hints[0] != delegation {
				t.Errorf("%s asks for %v, want the kept %v", m.MessageType, hints, delegation)
			}
			if cur := f.c.Current(); (cur != nil) != !tc.solicitKept {
				t.Errorf("Current() = %+v while the first %s is out; want the kept lease only when rebinding", cur, m.MessageType)
			}
		})
	}
}
