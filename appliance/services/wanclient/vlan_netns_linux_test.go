package wanclient

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/appliance/services/dhcpclient"
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
