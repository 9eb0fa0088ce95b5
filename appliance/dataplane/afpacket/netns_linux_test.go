package afpacket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"

	"golang.org/x/sys/unix"
)

// requireNetAdmin skips (or, under CI=true, fails) a test that needs root
// and the ip/ethtool tools to build veth topologies in network namespaces.
func requireNetAdmin(t testing.TB) {
	t.Helper()
	testenv.Require(t, "root", "ip", "ethtool")
}

// veth is a veth pair "va"/"vb" in a fresh network namespace, with IPv6 off
// (no neighbour discovery noise) and GRO/GSO/TSO/TX checksum offloads off.
type veth struct {
	ns *netnstest.Namespace
}

const vethA, vethB = "va", "vb"

func newVeth(t testing.TB, mtu int) *veth {
	t.Helper()
	requireNetAdmin(t)
	ns := netnstest.New(t, "afpt")
	ns.Sysctl(t, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	end := func(dev string) netnstest.End {
		return netnstest.End{NS: ns, Name: dev, MTU: mtu, Off: netnstest.FrameOffloads, Up: true}
	}
	netnstest.Veth(t, end(vethA), end(vethB))
	return &veth{ns: ns}
}

// open opens a ring socket on dev inside the namespace.
func (v *veth) open(t testing.TB, dev string, cfg Config) *Socket {
	t.Helper()
	var s *Socket
	var err error
	v.ns.Do(t, func() { s, err = Open(dev, cfg) })
	if err != nil {
		t.Fatalf("Open(%s): %v", dev, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// plain is an ordinary (ring-less) AF_PACKET socket used as the independent
// side of a test: it sends with sendto and receives with recvmsg, reading the
// stripped VLAN tag from PACKET_AUXDATA.
type plain struct {
	fd      int
	ifindex int
}

func (v *veth) plain(t testing.TB, dev string) *plain {
	t.Helper()
	var p *plain
	v.ns.Do(t, func() {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			t.Fatalf("InterfaceByName(%s): %v", dev, err)
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("socket: %v", err)
		}
		p = &plain{fd: fd, ifindex: ifi.Index}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
			t.Fatalf("SO_RCVBUFFORCE: %v", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 16<<20); err != nil {
			t.Fatalf("SO_SNDBUFFORCE: %v", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			t.Fatalf("PACKET_AUXDATA: %v", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			t.Fatalf("bind: %v", err)
		}
	})
	return p
}

// send transmits frame, retrying while the device queue is full. It
// reports failure with t.Errorf so that it may run on any goroutine.
func (p *plain) send(t testing.TB, frame []byte) {
	t.Helper()
	for {
		err := unix.Sendto(p.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: p.ifindex})
		if err == unix.ENOBUFS || err == unix.EAGAIN {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err != nil {
			t.Errorf("sendto: %v", err)
		}
		return
	}
}

// received is a frame as the plain socket saw it, with the stripped tag
// re-inserted so that it can be compared with what went on the wire.
type received struct {
	wire    []byte
	pkttype uint8
	tagged  bool // the tag arrived out of band (auxdata), not inline
}

// recv waits up to timeout for the next frame that is not our own outgoing
// one; ok is false on timeout.
func (p *plain) recv(t testing.TB, timeout time.Duration) (r received, ok bool) {
	t.Helper()
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return received{}, false
		}
		pfd := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if n == 0 {
			continue
		}
		n, oobn, _, from, err := unix.Recvmsg(p.fd, buf, oob, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("recvmsg: %v", err)
		}
		sll := from.(*unix.SockaddrLinklayer)
		if sll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		r = received{wire: append([]byte(nil), buf[:n]...), pkttype: sll.Pkttype}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			t.Fatalf("parse cmsg: %v", err)
		}
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < 20 {
				continue
			}
			status := binary.NativeEndian.Uint32(m.Data[0:])
			if status&unix.TP_STATUS_VLAN_VALID == 0 {
				continue
			}
			tci := binary.NativeEndian.Uint16(m.Data[16:])
			tpid := uint16(0x8100)
			if status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
				tpid = binary.NativeEndian.Uint16(m.Data[18:])
			}
			r.wire = insertTag(r.wire, tpid, tci)
			r.tagged = true
		}
		return r, true
	}
}

// collect receives frames on p until want test frames of the given id
// arrived or timeout passed.
func (p *plain) collect(t testing.TB, id uint16, want int, timeout time.Duration) []received {
	t.Helper()
	var got []received
	deadline := time.Now().Add(timeout)
	for len(got) < want {
		r, ok := p.recv(t, time.Until(deadline))
		if !ok {
			break
		}
		if tid, _, ok := parseTestFrame(r.wire); ok && tid == id {
			got = append(got, r)
		}
	}
	return got
}

// insertTag returns frame with a VLAN tag inserted after the MAC addresses.
func insertTag(frame []byte, tpid, tci uint16) []byte {
	out := make([]byte, 0, len(frame)+4)
	out = append(out, frame[:12]...)
	out = binary.BigEndian.AppendUint16(out, tpid)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, frame[12:]...)
}

// Test frames: a local experimental EtherType, a magic word, a test id and
// a sequence number, then a pattern derived from the sequence number.
const testEtherType = 0x88b5

var testMagic = []byte("afpT")

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
)

// testFrame builds a size-byte test frame; frames shorter than 24 bytes
// carry only part of the header.
func testFrame(dst, src net.HardwareAddr, id uint16, seq uint32, size int) []byte {
	f := make([]byte, max(size, 24))
	copy(f[0:], dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], testEtherType)
	copy(f[14:], testMagic)
	binary.BigEndian.PutUint16(f[18:], id)
	binary.BigEndian.PutUint32(f[20:], seq)
	for i := 24; i < size; i++ {
		f[i] = byte(seq*7 + uint32(i))
	}
	return f[:size]
}

// parseTestFrame finds the test header in an untagged frame or one with up
// to two VLAN tags inline.
func parseTestFrame(f []byte) (id uint16, seq uint32, ok bool) {
	off := 12
	for range 3 {
		if len(f) < off+2 {
			return 0, 0, false
		}
		switch binary.BigEndian.Uint16(f[off:]) {
		case 0x8100, 0x88a8:
			off += 4
			continue
		case testEtherType:
			b := f[off+2:]
			if len(b) < 10 || !bytes.Equal(b[:4], testMagic) {
				return 0, 0, false
			}
			return binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint32(b[6:]), true
		}
		return 0, 0, false
	}
	return 0, 0, false
}

// drain reads blocks from s until want test frames with the given id
// arrived or timeout passed, calling fn for each of them.
func drain(t testing.TB, s *Socket, id uint16, want int, timeout time.Duration, fn func(p *Packet)) int {
	t.Helper()
	n := 0
	err := readBlocks(s, timeout, func(b *Block, p *Packet) bool {
		for b.Next(p) {
			if tid, _, ok := parseTestFrame(p.Data); ok && tid == id {
				n++
				if fn != nil {
					fn(p)
				}
			}
		}
		return n < want
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readBlocks hands fn each block NextBlock returns, with a Packet to
// iterate it, until fn returns false, timeout passed or NextBlock fails.
func readBlocks(s *Socket, timeout time.Duration, fn func(b *Block, p *Packet) bool) error {
	deadline := time.Now().Add(timeout)
	var p Packet
	for more := true; more && time.Now().Before(deadline); {
		b, err := s.NextBlock(20 * time.Millisecond)
		if err != nil {
			return fmt.Errorf("NextBlock: %w", err)
		}
		if b == nil {
			continue
		}
		more = fn(b, &p)
		s.ReleaseBlock()
	}
	return nil
}

// background runs fn on a goroutine of its own and returns where its
// error goes, and stop, which closes fn's stop channel, wakes s (if not
// nil) out of a NextBlock and waits for fn to end. fn must end soon after
// its stop channel closes. The test's cleanup calls stop too, so the
// goroutine is stopped and joined also when the test fails early.
func background(t testing.TB, s *Socket, fn func(stop <-chan struct{}) error) (done <-chan error, stop func()) {
	errc := make(chan error, 1)
	stopc := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		errc <- fn(stopc)
	}()
	stop = sync.OnceFunc(func() {
		close(stopc)
		if s != nil {
			s.Wake() // ErrClosed once closed, when nothing waits any more
		}
		<-exited
	})
	t.Cleanup(stop)
	return errc, stop
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
