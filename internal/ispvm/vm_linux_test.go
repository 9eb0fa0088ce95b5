package ispvm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/internal/netnstest"
)

// tapNS makes a namespace with a tap device "isp0" for the VM's NIC.
func tapNS(t *testing.T) *netnstest.Namespace {
	ns := netnstest.New(t, "ispvm")
	ns.IP(t, "tuntap", "add", "dev", "isp0", "mode", "tap")
	ns.IP(t, "link", "set", "isp0", "up")
	return ns
}

// rawPort is an AF_PACKET socket on a tap that sees VLAN tags: the kernel
// takes the tag out of a received frame into the packet's metadata, and
// recv puts it back where it was on the wire.
type rawPort struct {
	fd   int
	addr unix.SockaddrLinklayer
}

func openRaw(t *testing.T, ns *netnstest.Namespace, dev string) *rawPort {
	p := &rawPort{fd: -1}
	ns.Do(t, func() {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			t.Fatal(err)
		}
		p.fd = fd
		p.addr = unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}
		if err := unix.Bind(fd, &p.addr); err != nil {
			t.Fatal(err)
		}
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1)
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
		tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	t.Cleanup(func() { unix.Close(p.fd) })
	return p
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (p *rawPort) send(frame []byte) error { return unix.Sendto(p.fd, frame, 0, &p.addr) }

// recv returns the next frame, its VLAN tag reinserted, or nil after the
// receive timeout.
func (p *rawPort) recv() []byte {
	buf, oob := make([]byte, 65536), make([]byte, 256)
	n, oobn, _, _, err := unix.Recvmsg(p.fd, buf, oob, 0)
	if err != nil {
		return nil
	}
	frame := buf[:n]
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < 20 {
			continue
		}
		status := binary.NativeEndian.Uint32(m.Data[0:])
		tci := binary.NativeEndian.Uint16(m.Data[16:])
		tpid := binary.NativeEndian.Uint16(m.Data[18:])
		if status&unix.TP_STATUS_VLAN_VALID != 0 && len(frame) >= 12 {
			if status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
				tpid = unix.ETH_P_8021Q
			}
			tag := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tpid), tci)
			frame = append(append(append([]byte(nil), frame[:12]...), tag...), frame[12:]...)
		}
	}
	return frame
}

// padi is a PPPoE PADI from src, tagged with vlan unless 0: an empty
// Service-Name and a Host-Uniq.
func padi(src net.HardwareAddr, vlan int) []byte {
	f := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, src...)
	if vlan != 0 {
		f = binary.BigEndian.AppendUint16(f, unix.ETH_P_8021Q)
		f = binary.BigEndian.AppendUint16(f, uint16(vlan))
	}
	f = binary.BigEndian.AppendUint16(f, 0x8863)
	tags := []byte{0x01, 0x01, 0, 0, 0x01, 0x03, 0, 4, 'e', '1', 'k', 'b'}
	f = append(f, 0x11, 0x09, 0, 0)
	f = binary.BigEndian.AppendUint16(f, uint16(len(tags)))
	return append(f, tags...)
}

// pado parses a frame as a PADO to dst: its VLAN ID (0: untagged) and
// AC-Name, or ok false.
func pado(frame []byte, dst net.HardwareAddr) (vlan int, acName string, ok bool) {
	if len(frame) < 14 || !bytes.Equal(frame[:6], dst) {
		return 0, "", false
	}
	b := frame[12:]
	if binary.BigEndian.Uint16(b) == unix.ETH_P_8021Q {
		if len(b) < 4 {
			return 0, "", false
		}
		vlan = int(binary.BigEndian.Uint16(b[2:]) & 0xfff)
		b = b[4:]
	}
	if len(b) < 8 || binary.BigEndian.Uint16(b) != 0x8863 || b[2] != 0x11 || b[3] != 0x07 {
		return 0, "", false
	}
	n := int(binary.BigEndian.Uint16(b[6:]))
	tags := b[8:]
	if n > len(tags) {
		return 0, "", false
	}
	tags = tags[:n]
	for len(tags) >= 4 {
		typ, l := binary.BigEndian.Uint16(tags), int(binary.BigEndian.Uint16(tags[2:]))
		if 4+l > len(tags) {
			break
		}
		if typ == 0x0102 {
			acName = string(tags[4 : 4+l])
		}
		tags = tags[4+l:]
	}
	return vlan, acName, true
}

// TestPADO boots the VM, untagged and on VLAN 7, and checks that a PADI
// sent from the host on its tap gets a PADO with the configured AC-Name
// (tagged like the PADI).
func TestPADO(t *testing.T) {
	for _, tc := range []struct {
		vlan int
		ac   string
	}{
		{vlan: 0, ac: "isp-untagged"},
		{vlan: 7, ac: "isp-vlan7"},
	} {
		t.Run(fmt.Sprintf("vlan%d", tc.vlan), func(t *testing.T) {
			ns := tapNS(t)
			vm := Start(t, Config{Netns: ns.Name(), Tap: "isp0", VLAN: tc.vlan, ACName: tc.ac})
			t.Logf("boot to pppoe-server running: %v", vm.BootTime.Round(10*time.Millisecond))
			port := openRaw(t, ns, "isp0")
			src := net.HardwareAddr{0x02, 0, 0, 0, 0x42, 0x01}
			deadline := time.Now().Add(15 * time.Second)
			var got []string
			for time.Now().Before(deadline) {
				if err := port.send(padi(src, tc.vlan)); err != nil {
					t.Fatalf("sending PADI: %v", err)
				}
				for end := time.Now().Add(time.Second); time.Now().Before(end); {
					f := port.recv()
					if f == nil {
						continue
					}
					vlan, ac, ok := pado(f, src)
					if !ok {
						continue
					}
					if vlan == tc.vlan && ac == tc.ac {
						return
					}
					got = append(got, fmt.Sprintf("VLAN %d AC-Name %q", vlan, ac))
				}
			}
			t.Fatalf("no PADO with VLAN %d and AC-Name %q within 15 s; PADOs: %v", tc.vlan, tc.ac, got)
		})
	}
}
