package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/services/dhcpclient"
)

// PPPoEDHCPv6 carries the WAN's DHCPv6 client over the PPPoE session (a
// dhcpclient.Transport): Read returns the session's IPv6/UDP datagrams
// to port 546 the WAN port's workers received (pppoeIn queues them, as
// untagged Ethernet frames of the session's MACs); Write sends the
// client's Ethernet/IPv6 frame in the session (PPP protocol 0x0057) to
// the AC, on a tagged WAN with the WAN VLAN's tag and control priority.
type PPPoEDHCPv6 struct {
	l    *PPPoELink
	done chan struct{}
	once sync.Once
}

// DHCPv6 opens a transport for the DHCPv6 client over the session (a
// *PPPoEDHCPv6); one at a time (they share the queue).
func (l *PPPoELink) DHCPv6() dhcpclient.Transport {
	return &PPPoEDHCPv6{l: l, done: make(chan struct{})}
}

// Read blocks for the next DHCPv6 frame from the session; its UDP
// checksum is not vouched for.
func (t *PPPoEDHCPv6) Read(b []byte) (int, bool, error) {
	n, ok := t.l.q.dhcp6.next(t.done, b)
	if !ok {
		return 0, false, net.ErrClosed
	}
	return n, false, nil
}

// Write sends the untagged Ethernet/IPv6 frame b in the session up (its
// Ethernet destination, dst, gives way to the AC's MAC).
func (t *PPPoEDHCPv6) Write(b []byte, _ net.HardwareAddr) error {
	return t.l.sendIPv6(b)
}

// Close wakes a blocked Read.
func (t *PPPoEDHCPv6) Close() error {
	t.once.Do(func() { close(t.done) })
	return nil
}

// sendIPv6 frames the IPv6 packet of the untagged Ethernet frame b in the
// session to the AC and sends it.
func (l *PPPoELink) sendIPv6(b []byte) error {
	const eth = frame.EthernetHeaderLen
	if len(b) < eth+frame.IPv6HeaderLen || binary.BigEndian.Uint16(b[12:]) != frame.EtherTypeIPv6 {
		return fmt.Errorf("dataplane: PPPoE endpoint: not an IPv6 frame (%d bytes)", len(b))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return errors.New("dataplane: PPPoE endpoint: closed")
	}
	w := &l.cur().wan
	if w.ppp.sid == 0 {
		return errors.New("dataplane: PPPoE endpoint: no session up")
	}
	n := w.sessionFrame(l.buf, b, w.ctlTCI)
	if n == 0 {
		return fmt.Errorf("dataplane: PPPoE endpoint: an IPv6 packet of %d bytes", len(b)-eth)
	}
	out := l.buf[:n]
	to := &unix.SockaddrLinklayer{Ifindex: l.ifindex, Halen: 6}
	copy(to.Addr[:], w.ppp.ac[:])
	if err := unix.Sendto(l.fd, out, 0, to); err != nil {
		return fmt.Errorf("dataplane: PPPoE endpoint: send: %w", err)
	}
	return nil
}
