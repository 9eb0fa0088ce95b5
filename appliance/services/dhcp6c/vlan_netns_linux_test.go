package dhcp6c

import (
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/ingressdrop"
	"e1kbox/appliance/services/dhcpclient"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/vlanpeer"
)

// TestNetnsVLAN: the ISP's Kea sits behind a wire of VLAN 7 (vlanpeer on
// s0: its frames leave tagged, only VLAN 7 reaches it). The client on
// VLAN 7 with priority 6, behind ingressdrop's drop or demote attached
// for VLAN 7 (the dataplane's, as on the box), gets a prefix and an
// address; on the wire its DHCPv6 frames carry VLAN 7 and priority 6
// (the peer's counts, taken before it pops the tag), and none of them
// goes out untagged. The renewals (T1 1 s) are answered over the VLAN
// too.
func TestNetnsVLAN(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attach func(string, uint16) (*ingressdrop.Drop, error)
	}{{"drop", ingressdrop.Attach}, {"demote", ingressdrop.AttachDemote}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			peer := vlanpeer.In(t, l.isp, "s0", 7, 0)
			// The box's kernel answers no solicitation behind the program.
			l.isp.IP(t, "-6", "neigh", "replace", LinkLocal(boxMAC).String(), "lladdr", boxMAC.String(), "dev", "s0", "nud", "permanent")
			l.box.Do(t, func() {
				d, err := tc.attach("c0", 7)
				if err != nil {
					t.Fatalf("ingressdrop on c0: %v", err)
				}
				t.Cleanup(func() { d.Close() })
			})
			c, ch, _ := l.runClient(t, Config{Interface: "c0", MAC: boxMAC, StateDir: filepath.Join(l.dir, "state"),
				PrefixLength: 56, Address: true, VLAN: dhcpclient.VLAN{ID: 7, PCP: 6}})
			first := next(t, ch, 15*time.Second)
			if first.new == nil || len(first.new.Prefixes) != 1 || len(first.new.Addrs) != 1 {
				t.Fatalf("first change %+v over VLAN 7, want a prefix and an address", first)
			}
			// Renewals: Renew and Reply over the VLAN.
			netnstest.WaitFor(t, 8*time.Second, "two renewals answered", func() bool {
				s := c.Stats()
				return s.Sent["RENEW"] >= 2 && s.Received["REPLY"] >= 3 && s.State == "bound"
			})
			tagged := peer.Frames(t, vlanpeer.Key{Tagged: 1, VID: 7, PCP: 6, EtherType: unix.ETH_P_IPV6, Proto: unix.IPPROTO_UDP, Port: 547})
			if tagged < 4 { // Solicit, Request, two Renews
				seen, _ := peer.Seen()
				t.Errorf("the wire carried %d DHCPv6 frames to the server with VLAN 7 and priority 6, want at least 4; seen %+v", tagged, seen)
			}
			if n := peer.Frames(t, vlanpeer.Key{Tagged: 0, EtherType: unix.ETH_P_IPV6, Proto: unix.IPPROTO_UDP, Port: 547}); n != 0 {
				t.Errorf("%d untagged DHCPv6 frames to the server on the wire, want none", n)
			}
			if n := peer.Frames(t, vlanpeer.Key{Tagged: 1, VID: 7, PCP: 0, EtherType: unix.ETH_P_IPV6, Proto: unix.IPPROTO_UDP, Port: 547}) - tagged; n != 0 {
				t.Errorf("%d DHCPv6 frames to the server with another priority than 6", n)
			}
		})
	}
}
