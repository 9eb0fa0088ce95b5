package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/frame"
)

// PPPoELink is the PPPoE client's endpoint on the engine's WAN port: it
// is a pppoe.Link (Send) and hands the client the control frames the WAN
// port's workers receive (Receive into pppoe.Client.Input). The data of
// the session stays in the dataplane (wanlink_pppoe.go), which frames it
// in the session NAT.PPPoESession names.
type PPPoELink struct {
	q   *pppoeQueue
	cur func() *settings
	mac [6]byte

	mu      sync.Mutex // fd, buf
	fd      int        // a send-only AF_PACKET socket on the WAN interface; -1 closed
	ifindex int
	buf     []byte
}

// openPPPoELink opens the endpoint's socket on the WAN interface iface
// (in the calling thread's network namespace): protocol 0, so that it
// receives nothing.
func openPPPoELink(iface string, mac [6]byte, q *pppoeQueue, cur func() *settings) (*PPPoELink, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("dataplane: PPPoE endpoint: %w", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dataplane: PPPoE endpoint: packet socket: %w", err)
	}
	return &PPPoELink{q: q, cur: cur, mac: mac, fd: fd, ifindex: ifi.Index, buf: make([]byte, pppoeFrameMax+frame.VLANTagLen)}, nil
}

// PPPoE returns the WAN's PPPoE endpoint; nil outside NAT mode.
func (e *Engine) PPPoE() *PPPoELink { return e.pppLink }

// MAC is the router's WAN MAC, the client's source address
// (pppoe.Config.MAC).
func (l *PPPoELink) MAC() net.HardwareAddr { return net.HardwareAddr(l.mac[:]) }

// Send transmits the client's untagged Ethernet frame on the WAN port;
// on a tagged WAN with the WAN VLAN's tag and its control priority.
func (l *PPPoELink) Send(b []byte) error {
	if len(b) < frame.EthernetHeaderLen || len(b) > pppoeFrameMax {
		return fmt.Errorf("dataplane: PPPoE endpoint: a frame of %d bytes", len(b))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return errors.New("dataplane: PPPoE endpoint: closed")
	}
	out := b
	if w := &l.cur().wan; w.vid != 0 {
		out = l.buf[:len(b)+frame.VLANTagLen]
		copy(out, b[:12])
		binary.BigEndian.PutUint16(out[12:], frame.EtherTypeVLAN)
		binary.BigEndian.PutUint16(out[14:], w.ctlTCI)
		copy(out[16:], b[12:])
	}
	to := &unix.SockaddrLinklayer{Ifindex: l.ifindex, Halen: 6}
	copy(to.Addr[:], b[0:6])
	if err := unix.Sendto(l.fd, out, 0, to); err != nil {
		return fmt.Errorf("dataplane: PPPoE endpoint: send: %w", err)
	}
	return nil
}

// Receive calls input with each PPPoE control frame the WAN port
// received (untagged: discovery, LCP, authentication, the NCPs), in
// order, until ctx ends; the frame is valid only during the call
// (pppoe.Client.Input copies it). One goroutine at a time.
func (l *PPPoELink) Receive(ctx context.Context, input func([]byte)) error {
	return l.q.receive(ctx, input)
}

func (l *PPPoELink) close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	return err
}
