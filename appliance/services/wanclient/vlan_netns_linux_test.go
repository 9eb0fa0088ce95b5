package wanclient

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/appliance/services/wantap"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/vlanpeer"
)

// TestNetnsVLAN: the ISP's dnsmasq sits behind a wire of VLAN 7
// (vlanpeer on s0: its frames leave tagged, only VLAN 7 reaches it). The
// client on VLAN 7 with priority 6, behind ingressdrop's drop or demote
// attached for VLAN 7 (the dataplane's, as on the box), gets a lease and
// renews it (T1 5 s, unicast); on the wire its DHCP frames carry VLAN 7
// and priority 6 (the peer's counts, taken before it pops the tag), none
// goes out untagged or with another priority.
func TestNetnsVLAN(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attach func(string, uint16) (*ingressdrop.Drop, error)
	}{{"drop", ingressdrop.Attach}, {"demote", ingressdrop.AttachDemote}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			peer := vlanpeer.In(t, l.isp, "s0", 7, 0)
			l.startDnsmasq("10.80.0.100", "10.80.0.150")
			l.box.Do(t, func() {
				d, err := tc.attach("c0", 7)
				if err != nil {
					t.Fatalf("ingressdrop on c0: %v", err)
				}
				t.Cleanup(func() { d.Close() })
			})
			b := l.startClient(Config{Interface: "c0", MAC: boxMAC, VLAN: dhcpclient.VLAN{ID: 7, PCP: 6}}, nil)
			ch := b.change(t, 20*time.Second)
			if ch.new == nil || !netip.MustParsePrefix("10.80.0.0/24").Contains(ch.new.Addr.Addr()) {
				t.Fatalf("onChange(%v, %v) over VLAN 7, want a lease", ch.old, ch.new)
			}
			if dl, ok := l.dnsmasqLease(boxMAC); !ok || dl.addr != ch.new.Addr.Addr() {
				t.Errorf("dnsmasq's lease for %s: %+v, want %v", boxMAC, dl, ch.new.Addr.Addr())
			}
			if !eventually(15*time.Second, func() bool { s := b.c.Stats(); return s.Sent["REQUEST"] >= 2 && s.Received["ACK"] >= 2 }) {
				t.Errorf("no renewal answered over VLAN 7: %+v", b.c.Stats())
			}
			key := vlanpeer.Key{Tagged: 1, VID: 7, PCP: 6, EtherType: unix.ETH_P_IP, Proto: unix.IPPROTO_UDP, Port: 67}
			tagged := peer.Frames(t, key)
			if tagged < 3 { // DISCOVER, REQUEST, the renewal's REQUEST
				seen, _ := peer.Seen()
				t.Errorf("the wire carried %d DHCP frames to the server with VLAN 7 and priority 6, want at least 3; seen %+v", tagged, seen)
			}
			key.PCP = 0 // any
			if n := peer.Frames(t, key) - tagged; n != 0 {
				t.Errorf("%d DHCP frames to the server with another priority than 6", n)
			}
			if n := peer.Frames(t, vlanpeer.Key{Tagged: 0, EtherType: unix.ETH_P_IP}); n != 0 {
				t.Errorf("%d untagged IPv4 frames on the wire, want none", n)
			}
		})
	}
}

// TestNetnsVLANReplyFilter: through the real socket and ingressdrop's
// drop or demote, a client hears only its own link's replies (behind the
// demote, which hands every untagged IPv4 frame on, its socket filter
// sees to that). The ISP's side of the
// wire answers the client's DISCOVER with forged OFFERs: first on the
// wrong links (untagged and VLAN 8 for a client on VLAN 7, VLAN 7 for an
// untagged one), which the client never receives, then on its own, which
// it takes (it sends a REQUEST).
func TestNetnsVLANReplyFilter(t *testing.T) {
	untagged := wantap.VLAN{}
	for _, tc := range []struct {
		name        string
		vlan        dhcpclient.VLAN
		wrong       []wantap.VLAN
		right       wantap.VLAN
		wrongCounts string
	}{
		{"VLAN 7", dhcpclient.VLAN{ID: 7, PCP: 6}, []wantap.VLAN{untagged, {ID: 8}, {PCP: 6}}, wantap.VLAN{ID: 7}, "untagged, VLAN 8, priority-tagged"},
		{"untagged", dhcpclient.VLAN{}, []wantap.VLAN{{ID: 7}, {ID: 7, PCP: 6}}, untagged, "VLAN 7"},
	} {
		for _, prog := range []struct {
			name   string
			attach func(string, uint16) (*ingressdrop.Drop, error)
		}{{"drop", ingressdrop.Attach}, {"demote", ingressdrop.AttachDemote}} {
			t.Run(tc.name+", "+prog.name, func(t *testing.T) {
				l := newLab(t)
				l.box.Do(t, func() {
					d, err := prog.attach("c0", tc.vlan.ID)
					if err != nil {
						t.Fatalf("ingressdrop on c0: %v", err)
					}
					t.Cleanup(func() { d.Close() })
				})
				capture := l.isp.OpenPackets(t, "s0", true)
				b := l.startClient(Config{Interface: "c0", MAC: boxMAC, VLAN: tc.vlan}, nil)
				var disc *dhcpv4.DHCPv4
				netnstest.WaitFor(t, 10*time.Second, "the client's DISCOVER on the ISP's side", func() bool {
					for _, f := range capture.Frames() { // the kernel holds the tag aside
						if len(f) > 42 && f[12] == 0x08 && f[13] == 0x00 && f[36] == 0 && f[37] == 67 {
							if m, err := dhcpv4.FromBytes(f[42:]); err == nil && m.MessageType() == dhcpv4.MessageTypeDiscover {
								disc = m
								return true
							}
						}
					}
					return false
				})
				s := fakeServer{mac: ispMAC, ip: ispIP}
				yiaddr := netip.MustParseAddr("10.80.0.77")
				offer := s.frame(s.msg(disc, dhcpv4.MessageTypeOffer, yiaddr, leaseOpts()...), yiaddr)
				wire := l.isp.OpenPackets(t, "s0", false)
				for _, v := range tc.wrong {
					if v.ID == 0 && v.PCP != 0 { // priority-tagged: VLAN 0 in the tag
						wire.Send(t, slices.Insert(slices.Clone(offer), 12, 0x81, 0x00, v.PCP<<5, 0))
						continue
					}
					wire.Send(t, v.Tag(offer))
				}
				time.Sleep(time.Second)
				if st := b.c.Stats(); st.Received["OFFER"] != 0 {
					t.Errorf("the client received %d OFFERs on the wrong links (%s); stats %+v", st.Received["OFFER"], tc.wrongCounts, st)
				}
				wire.Send(t, tc.right.Tag(offer))
				if !eventually(5*time.Second, func() bool {
					st := b.c.Stats()
					return st.Received["OFFER"] == 1 && st.Sent["REQUEST"] >= 1
				}) {
					t.Errorf("the client did not take the OFFER on its own link: %+v", b.c.Stats())
				}
			})
		}
	}
}
