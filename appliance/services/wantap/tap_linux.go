package wantap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// sizeofAuxdata is sizeof(struct tpacket_auxdata).
const sizeofAuxdata = 20

// Tap is an AF_PACKET SOCK_RAW socket on the WAN interface, bound to one
// EtherType, whose BPF filter passes only the replies its client wants.
type Tap struct {
	conn *packet.Conn
	raw  syscall.RawConn
	oob  []byte
	vlan VLAN
	// ifindex is the interface's, for sendto on a VLAN.
	ifindex int
}

// Open opens the socket on iface for frames of etherType (ETH_P_IP or
// ETH_P_IPV6) to mac that filter passes, in the network namespace of the
// calling thread, and returns it with the interface's MTU. The filter is
// attached before the socket is bound, so nothing unfiltered is ever
// queued. PACKET_AUXDATA tells, per frame, whether the UDP checksum was
// verified or is still to be filled in (a frame from a local veth peer
// with checksum offload): those are not checked again.
//
// On a VLAN the socket sends every frame with the VLAN's tag and receives
// only the replies of that VLAN, which ingressdrop's program on the
// interface (attached for that VLAN) takes the tag off and marks: the
// kernel would clear an offloaded tag before it hands a frame to a socket
// bound to an EtherType, so without the mark the socket could not tell
// the VLAN's frames from untagged ones or another VLAN's. Untagged, it
// receives none of those marked frames. The MTU is the interface's
// (the kernel lets a tagged frame be 4 bytes longer).
func Open(iface string, mac net.HardwareAddr, etherType uint16, filter []bpf.Instruction, vlan VLAN) (*Tap, int, error) {
	if err := vlan.Check(); err != nil {
		return nil, 0, err
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, 0, err
	}
	prog, err := bpf.Assemble(vlan.Filter(filter))
	if err != nil {
		return nil, 0, fmt.Errorf("assemble filter: %w", err)
	}
	// Bound to one EtherType, not a tap (ETH_P_ALL): the kernel hands the
	// socket frames after tcx ingress, where the fast path has taken the
	// WAN port's forwarded frames and ingressdrop's program, drop or
	// demote, lets the clients' replies on. A tap would see every frame
	// the port receives before the fast path, and run its filter on it
	// (docs/dataplane.md, Measured). Such a socket never sees the frames
	// the box sends (only taps do, dev_queue_xmit_nit).
	conn, err := packet.Listen(ifi, packet.Raw, int(etherType), &packet.Config{Filter: prog})
	if err != nil {
		return nil, 0, fmt.Errorf("packet socket on %s: %w", iface, err)
	}
	t := &Tap{conn: conn, oob: make([]byte, unix.CmsgSpace(sizeofAuxdata)), vlan: vlan, ifindex: ifi.Index}
	if err := t.setup(ifi, mac); err != nil {
		conn.Close()
		return nil, 0, fmt.Errorf("packet socket on %s: %w", iface, err)
	}
	return t, ifi.MTU, nil
}

func (t *Tap) setup(ifi *net.Interface, mac net.HardwareAddr) error {
	raw, err := t.conn.SyscallConn()
	if err != nil {
		return err
	}
	t.raw = raw
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_PACKET, unix.PACKET_AUXDATA, 1)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("PACKET_AUXDATA: %w", serr)
	}
	if !bytes.Equal(mac, ifi.HardwareAddr) {
		// Replies go to our MAC, which is not the NIC's own.
		if err := t.conn.SetPromiscuous(true); err != nil {
			return fmt.Errorf("promiscuous: %w", err)
		}
	}
	return nil
}

// Read reads one frame into b; vouched says the kernel verified its
// checksum or will fill it in (a local peer's offload).
func (t *Tap) Read(b []byte) (n int, vouched bool, err error) {
	var oobn int
	var rerr error
	err = t.raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), b, t.oob, unix.MSG_DONTWAIT)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err != nil {
		return 0, false, err
	}
	if rerr != nil {
		return 0, false, rerr
	}
	return n, csumVouched(t.oob[:oobn]), nil
}

// csumVouched reads the auxdata's tp_status.
func csumVouched(oob []byte) bool {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= 4 {
			status := binary.NativeEndian.Uint32(m.Data[:4])
			return status&(unix.TP_STATUS_CSUMNOTREADY|unix.TP_STATUS_CSUM_VALID) != 0
		}
	}
	return false
}

// Write sends frame (untagged) to dst; on a VLAN with its tag in the
// frame, and the socket address's protocol 802.1Q, which the kernel takes
// for skb->protocol (a SOCK_RAW socket sends the frame as written: no
// path on the way out, veth or e1000e, moves an in-frame tag).
func (t *Tap) Write(frame []byte, dst net.HardwareAddr) error {
	if t.vlan.ID == 0 {
		_, err := t.conn.WriteTo(frame, &packet.Addr{HardwareAddr: dst})
		return err
	}
	to := &unix.SockaddrLinklayer{Protocol: htons(tpid8021Q), Ifindex: t.ifindex, Halen: 6}
	copy(to.Addr[:], dst)
	b := t.vlan.Tag(frame)
	var serr error
	err := t.raw.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, to)
		return !errors.Is(serr, unix.EAGAIN)
	})
	if err != nil {
		return err
	}
	return serr
}

// htons is v in network byte order, as the kernel reads a sockaddr's
// protocol (amd64, arm64).
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Close closes the socket.
func (t *Tap) Close() error { return t.conn.Close() }
