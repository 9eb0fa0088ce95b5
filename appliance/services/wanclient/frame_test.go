package wanclient

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/net/bpf"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/services/dhcpclient"
)

const ethHdrLen = frame.EthernetHeaderLen

// offerFrame is a server's OFFER to the client.
func offerFrame(t testing.TB) []byte {
	t.Helper()
	req := &dhcpv4.DHCPv4{TransactionID: dhcpv4.TransactionID{1, 2, 3, 4}, ClientHWAddr: clientMAC, ClientIPAddr: net.IPv4zero}
	return srv.frame(srv.msg(req, dhcpv4.MessageTypeOffer, leaseIP, leaseOpts()...), leaseIP)
}

// TestDecodeReply checks every reason a frame is dropped.
func TestDecodeReply(t *testing.T) {
	good := offerFrame(t)
	// edit returns good changed by f, with the IPv4 checksum fixed unless
	// keepSum.
	edit := func(f func(b []byte), keepSum bool) []byte {
		b := append([]byte(nil), good...)
		f(b)
		if !keepSum {
			ip := b[ethHdrLen:]
			binary.BigEndian.PutUint16(ip[10:12], 0)
			binary.BigEndian.PutUint16(ip[10:12], frame.Checksum(ip[:int(ip[0]&0xf)*4], 0))
		}
		return b
	}
	// udpFix recomputes the UDP checksum.
	udpFix := func(b []byte) []byte {
		ip := b[ethHdrLen:]
		udp := ip[ipv4HdrLen:]
		binary.BigEndian.PutUint16(udp[6:8], 0)
		binary.BigEndian.PutUint16(udp[6:8], frame.Checksum(udp, frame.PseudoSumIPv4([4]byte(ip[12:16]), [4]byte(ip[16:20]), frame.ProtoUDP, uint16(len(udp)))))
		return b
	}
	withMsg := func(f func(m *dhcpv4.DHCPv4)) []byte {
		req := &dhcpv4.DHCPv4{TransactionID: dhcpv4.TransactionID{1, 2, 3, 4}, ClientHWAddr: clientMAC, ClientIPAddr: net.IPv4zero}
		m := srv.msg(req, dhcpv4.MessageTypeOffer, leaseIP, leaseOpts()...)
		f(m)
		return srv.frame(m, leaseIP)
	}
	rawPayload := func(p []byte) []byte {
		f := dhcpclient.Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: serverIP, DstIP: leaseIP, SrcPort: 67, DstPort: 68, Payload: p}
		return f.Marshal()
	}
	for _, tc := range []struct {
		name      string
		frame     []byte
		csumValid bool
		want      string
	}{
		{"good", good, false, ""},
		{"short", good[:40], false, dhcpclient.DropShort},
		{"ARP", edit(func(b []byte) { b[12], b[13] = 0x08, 0x06 }, true), false, dhcpclient.DropNotIPv4},
		{"VLAN tag", edit(func(b []byte) { b[12], b[13] = 0x81, 0x00 }, true), false, dhcpclient.DropNotIPv4},
		{"IPv6 version", edit(func(b []byte) { b[ethHdrLen] = 0x65 }, false), false, dhcpclient.DropBadIPHeader},
		{"IHL 4", edit(func(b []byte) { b[ethHdrLen] = 0x44 }, true), false, dhcpclient.DropBadIPHeader},
		{"truncated", good[:200], false, dhcpclient.DropBadIPHeader},
		{"IP checksum", edit(func(b []byte) { b[ethHdrLen+10] ^= 0xff }, true), false, dhcpclient.DropBadIPChecksum},
		{"more fragments", edit(func(b []byte) { b[ethHdrLen+6] = 0x20 }, false), false, dhcpclient.DropFragment},
		{"later fragment", edit(func(b []byte) { b[ethHdrLen+7] = 0x10 }, false), false, dhcpclient.DropFragment},
		{"TCP", edit(func(b []byte) { b[ethHdrLen+9] = 6 }, false), false, dhcpclient.DropNotUDP},
		{"UDP length short", udpFix(edit(func(b []byte) { b[ethHdrLen+ipv4HdrLen+4], b[ethHdrLen+ipv4HdrLen+5] = 0, 7 }, true)), false, dhcpclient.DropBadUDPLength},
		{"UDP length long", edit(func(b []byte) { b[ethHdrLen+ipv4HdrLen+4] = 0xff }, true), false, dhcpclient.DropBadUDPLength},
		{"UDP checksum", edit(func(b []byte) { b[ethHdrLen+ipv4HdrLen+6] ^= 0xff }, true), false, dhcpclient.DropBadUDPChecksum},
		{"UDP checksum vouched by the kernel", edit(func(b []byte) { b[ethHdrLen+ipv4HdrLen+6] ^= 0xff }, true), true, ""},
		{"no UDP checksum", edit(func(b []byte) { b[ethHdrLen+ipv4HdrLen+6], b[ethHdrLen+ipv4HdrLen+7] = 0, 0 }, true), false, ""},
		{"to port 67", udpFix(edit(func(b []byte) { b[ethHdrLen+ipv4HdrLen+3] = 67 }, true)), false, dhcpclient.DropWrongPort},
		{"from port 1234", udpFix(edit(func(b []byte) { b[ethHdrLen+ipv4HdrLen], b[ethHdrLen+ipv4HdrLen+1] = 0x04, 0xd2 }, true)), false, dhcpclient.DropWrongPort},
		{"not DHCP", rawPayload([]byte("hello")), false, dropBadDHCP},
		{"bad cookie", udpFix(edit(func(b []byte) { b[ethHdrLen+ipv4HdrLen+udpHdrLen+236] = 0 }, true)), false, dropBadDHCP},
		{"BOOTREQUEST", withMsg(func(m *dhcpv4.DHCPv4) { m.OpCode = dhcpv4.OpcodeBootRequest }), false, dropNotReply},
		{"token ring", withMsg(func(m *dhcpv4.DHCPv4) { m.HWType = 6 }), false, dropNotEthernet},
		{"no message type", withMsg(func(m *dhcpv4.DHCPv4) { m.Options.Del(dhcpv4.OptionDHCPMessageType) }), false, dropNoMessageType},
	} {
		_, why := decodeReply(tc.frame, tc.csumValid)
		if why != tc.want {
			t.Errorf("%s: decodeReply = %q, want %q", tc.name, why, tc.want)
		}
	}
	// IPv4 options are fine.
	b := append([]byte(nil), good...)
	withOpts := append(append(append([]byte(nil), b[:ethHdrLen+ipv4HdrLen]...), 1, 1, 1, 0), b[ethHdrLen+ipv4HdrLen:]...)
	ip := withOpts[ethHdrLen:]
	ip[0] = 0x46
	binary.BigEndian.PutUint16(ip[2:4], binary.BigEndian.Uint16(ip[2:4])+4)
	binary.BigEndian.PutUint16(ip[10:12], 0)
	binary.BigEndian.PutUint16(ip[10:12], frame.Checksum(ip[:24], 0))
	r, why := decodeReply(withOpts, false)
	if why != "" || r.Msg.MessageType() != dhcpv4.MessageTypeOffer || r.SrcIP != serverIP || !macEqual(r.SrcMAC, serverMAC) {
		t.Errorf("IPv4 options: decodeReply = %+v, %q", r, why)
	}
}

// TestIgnored feeds a selecting client frames it must not take and checks
// they are counted by reason and change nothing; then a good OFFER works.
func TestIgnored(t *testing.T) {
	e := newEnv(t, nil)
	e.run()
	d := e.expect(dhcpv4.MessageTypeDiscover)
	offer := func(f func(m *dhcpv4.DHCPv4)) []byte {
		m := srv.msg(d.msg, dhcpv4.MessageTypeOffer, leaseIP, leaseOpts()...)
		f(m)
		return srv.frame(m, leaseIP)
	}
	good := offer(func(*dhcpv4.DHCPv4) {})
	broadcast := func(b []byte) []byte { copy(b[0:6], broadcastMAC); return b }
	toOther := append([]byte(nil), good...)
	copy(toOther[0:6], otherMAC)
	badSum := append([]byte(nil), good...)
	badSum[len(badSum)-1] ^= 0xff
	frames := []struct {
		frame []byte
		why   string
	}{
		{offer(func(m *dhcpv4.DHCPv4) { m.TransactionID[0] ^= 0xff }), dropWrongXID},
		{broadcast(offer(func(m *dhcpv4.DHCPv4) { m.ClientHWAddr = otherMAC })), dropWrongChaddr},
		{toOther, dropNotOurMAC},
		{badSum, dhcpclient.DropBadUDPChecksum},
		{good[:100], dhcpclient.DropBadIPHeader},
		{good[:20], dhcpclient.DropShort},
		{offer(func(m *dhcpv4.DHCPv4) { m.UpdateOption(dhcpv4.OptMessageType(dhcpv4.MessageTypeAck)) }), dropUnexpected},
		{offer(func(m *dhcpv4.DHCPv4) { m.YourIPAddr = net.IPv4zero }), dropBadOffer},
		{offer(func(m *dhcpv4.DHCPv4) { m.YourIPAddr = net.IPv4(224, 0, 0, 1) }), dropBadOffer},
		{offer(func(m *dhcpv4.DHCPv4) { m.Options.Del(dhcpv4.OptionServerIdentifier) }), dropBadOffer},
	}
	want := map[string]uint64{}
	for _, f := range frames {
		e.deliver(f.frame)
		want[f.why]++
	}
	deadline := time.Now().Add(5 * time.Second)
	for cmp.Diff(want, e.c.Stats().Ignored) != "" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if diff := diffStats(want, e.c.Stats().Ignored); diff != "" {
		t.Errorf("Ignored (-want +got):\n%s", diff)
	}
	// Counted as received: the replies for our chaddr that got past the
	// frame checks (wrong xid, ACK, three bad OFFERs).
	if diff := diffStats(map[string]uint64{"OFFER": 4, "ACK": 1}, e.c.Stats().Received); diff != "" {
		t.Errorf("Received (-want +got):\n%s", diff)
	}
	e.quiet()
	if st := e.c.Stats().State; st != "selecting" {
		t.Errorf("state %s after foreign frames", st)
	}
	e.deliver(good)
	e.expect(dhcpv4.MessageTypeRequest)
}

func TestReplyFilter(t *testing.T) {
	vm, err := bpf.NewVM(dhcpclient.FilterIPv4(clientPort))
	if err != nil {
		t.Fatal(err)
	}
	good := offerFrame(t)
	request := (&dhcpclient.Frame{DstMAC: broadcastMAC, SrcMAC: clientMAC, SrcIP: zeroAddr, DstIP: bcastAddr, SrcPort: 68, DstPort: 67, Payload: make([]byte, 300)}).Marshal()
	dns := (&dhcpclient.Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: serverIP, DstIP: leaseIP, SrcPort: 53, DstPort: 5353, Payload: make([]byte, 40)}).Marshal()
	withOpts := append(append(append([]byte(nil), good[:ethHdrLen+ipv4HdrLen]...), 1, 1, 1, 0), good[ethHdrLen+ipv4HdrLen:]...)
	withOpts[ethHdrLen] = 0x46
	tcp := append([]byte(nil), good...)
	tcp[ethHdrLen+9] = 6
	later := append([]byte(nil), good...)
	later[ethHdrLen+7] = 1
	first := append([]byte(nil), good...)
	first[ethHdrLen+6] = 0x20 // MF, offset 0: passes, decodeUDP drops it
	arp := append([]byte(nil), good...)
	arp[12], arp[13] = 0x08, 0x06
	for _, tc := range []struct {
		name  string
		frame []byte
		pass  bool
	}{
		{"DHCP reply", good, true},
		{"IPv4 options", withOpts, true},
		{"first fragment", first, true},
		{"DHCP request", request, false},
		{"DNS", dns, false},
		{"TCP", tcp, false},
		{"later fragment", later, false},
		{"ARP", arp, false},
	} {
		n, err := vm.Run(tc.frame)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := n > 0; got != tc.pass {
			t.Errorf("%s: filter passes %v, want %v", tc.name, got, tc.pass)
		}
		if n > 0 && n < len(tc.frame) {
			t.Errorf("%s: filter cuts the frame to %d bytes", tc.name, n)
		}
	}
	if _, err := bpf.Assemble(dhcpclient.FilterIPv4(clientPort)); err != nil {
		t.Errorf("assemble: %v", err)
	}
}
