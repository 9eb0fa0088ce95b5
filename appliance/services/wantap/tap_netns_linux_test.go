package wantap

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// TestTapSeesRepliesOnly: the socket receives the frames of its EtherType
// that arrive on the interface and none of those the box sends out of it
// (by any socket), whatever its filter passes.
func TestTapSeesRepliesOnly(t *testing.T) {
	testenv.Require(t, "root", "ip")
	box, peer := netnstest.New(t, "wantap-box"), netnstest.New(t, "wantap-peer")
	netnstest.Veth(t, netnstest.End{NS: box, Name: "wan0", MAC: "02:00:00:00:00:01", Up: true},
		netnstest.End{NS: peer, Name: "isp0", MAC: "02:00:00:00:00:02", Up: true})
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	acceptAll := []bpf.Instruction{bpf.RetConstant{Val: 0xffff}}
	var tap *Tap
	box.Do(t, func() {
		var err error
		if tap, _, err = Open("wan0", mac, unix.ETH_P_IP, acceptAll, VLAN{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { tap.Close() })

	// frame is an IPv4 frame (the kernel's stack drops its garbage
	// header) or, with other, one of a local experimental EtherType.
	frame := func(dst, src net.HardwareAddr, tag byte, other bool) []byte {
		f := append(append(append([]byte(nil), dst...), src...), 0x08, 0x00)
		if other {
			f[12], f[13] = 0x88, 0xb5
		}
		return append(f, bytes.Repeat([]byte{tag}, 46)...)
	}
	// Out of the box: by another socket (the dataplane's) and by the tap.
	box.OpenPackets(t, "wan0", false).Send(t, frame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, mac, 'o', false))
	if err := tap.Write(frame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, mac, 't', false), net.HardwareAddr{2, 0, 0, 0, 0, 2}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	// Into the box: one of another EtherType, one of the socket's.
	in := peer.OpenPackets(t, "isp0", false)
	in.Send(t, frame(mac, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 'x', true))
	in.Send(t, frame(mac, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 'i', false))

	var got []byte
	buf := make([]byte, 2048)
	for {
		tap.conn.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := tap.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if n >= 15 {
			got = append(got, buf[14])
		}
	}
	if string(got) != "i" {
		t.Errorf("the tap read frames tagged %q, want only the incoming one %q", got, "i")
	}
}
