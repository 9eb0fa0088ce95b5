package wantap

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/bpf"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// TestTapSeesRepliesOnly: the tap receives the frames that arrive on the
// interface and none of those the box sends out of it (by any socket),
// whatever its filter passes.
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
		if tap, _, err = Open("wan0", mac, acceptAll); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { tap.Close() })

	frame := func(dst, src net.HardwareAddr, tag byte) []byte {
		f := append(append(append([]byte(nil), dst...), src...), 0x88, 0xb5) // local experimental ethertype
		return append(f, bytes.Repeat([]byte{tag}, 46)...)
	}
	// Out of the box: by another socket (the dataplane's) and by the tap.
	box.OpenPackets(t, "wan0", false).Send(t, frame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, mac, 'o'))
	if err := tap.Write(frame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, mac, 't'), net.HardwareAddr{2, 0, 0, 0, 0, 2}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	// Into the box.
	peer.OpenPackets(t, "isp0", false).Send(t, frame(mac, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 'i'))

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
		if n >= 15 && buf[12] == 0x88 && buf[13] == 0xb5 { // not the kernel's IPv6 chatter
			got = append(got, buf[14])
		}
	}
	if string(got) != "i" {
		t.Errorf("the tap read frames tagged %q, want only the incoming one %q", got, "i")
	}
}
