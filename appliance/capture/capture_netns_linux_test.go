package capture

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// TestCaptureNetns sends 1000 UDP frames to port 5000 and 300 to port 6000
// over a veth pair and captures "udp port 5000" on the far end: the file
// holds exactly the 1000, in order, and tcpdump reads them.
func TestCaptureNetns(t *testing.T) {
	testenv.Require(t, "root", "ip", "ethtool", "tcpdump")
	ns := netnstest.New(t, "dash-cap")
	netnstest.Veth(t,
		netnstest.End{NS: ns, Name: "cap-a", Off: netnstest.FrameOffloads, Up: true},
		netnstest.End{NS: ns, Name: "cap-b", Off: netnstest.FrameOffloads, Up: true})
	var buf bytes.Buffer
	var res Result
	var runErr error
	ns.Do(t, func() {
		a, err := net.InterfaceByName("cap-a")
		if err != nil {
			t.Fatal(err)
		}
		tx, err := packet.Listen(a, packet.Raw, unix.ETH_P_ALL, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Close()
		sent := make(chan struct{})
		defer func() { <-sent }() // before tx closes
		go func() {
			defer close(sent)
			time.Sleep(300 * time.Millisecond) // the capture socket is open by then
			bcast := &packet.Addr{HardwareAddr: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
			for i := range 1000 {
				tx.WriteTo(udpFrame(i, 60+i%200), bcast)
				if i%4 == 0 {
					noise := udpFrame(i, 80)
					noise[14+22], noise[14+23] = 6000>>8, 6000&0xff
					tx.WriteTo(noise, bcast)
				}
				if i%50 == 49 {
					// Paced: a burst of 1250 frames overflowed a queue on
					// the way (843 of 1000 arrived) on a loaded machine.
					time.Sleep(2 * time.Millisecond)
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, runErr = Run(ctx, Request{Interface: "cap-b", Filter: Filter{Proto: "udp", Port: 5000},
			MaxPackets: 1000, MaxBytes: 64 << 20, Duration: 15 * time.Second}, &buf)
	})
	if runErr != nil {
		t.Fatal(runErr)
	}
	if res.Packets != 1000 || res.Ended != "count" || res.Bytes != int64(buf.Len()) {
		t.Fatalf("result %+v, file %d bytes", res, buf.Len())
	}
	f, err := Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range f.Packets {
		if want := udpFrame(i, 60+i%200); !bytes.Equal(p.Data, want) {
			t.Fatalf("packet %d: %x, want %x", i, p.Data, want)
		}
	}
	path := filepath.Join(t.TempDir(), "c.pcapng")
	os.WriteFile(path, buf.Bytes(), 0o644)
	checkTcpdump(t, path, 1000)
}

func TestCaptureBounds(t *testing.T) {
	testenv.Require(t, "root", "ip")
	ns := netnstest.New(t, "dash-capb")
	netnstest.Veth(t, netnstest.End{NS: ns, Name: "capb-a", Up: true}, netnstest.End{NS: ns, Name: "capb-b", Up: true})
	ns.Do(t, func() {
		// Nothing comes: the time bound ends it, with a valid empty file.
		var buf bytes.Buffer
		start := time.Now()
		res, err := Run(context.Background(), Request{Interface: "capb-b", Filter: Filter{Proto: "tcp", Port: 1}, Duration: 300 * time.Millisecond}, &buf)
		if err != nil || res.Ended != "time" || res.Packets != 0 || time.Since(start) > 5*time.Second {
			t.Fatalf("result %+v, %v after %v", res, err, time.Since(start))
		}
		if f, err := Read(buf.Bytes()); err != nil || len(f.Packets) != 0 {
			t.Fatalf("empty capture: %v %+v", err, f)
		}
		// Cancelling ends it at once.
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		res, err = Run(ctx, Request{Interface: "capb-b", Duration: time.Minute}, &buf)
		if err != nil || res.Ended != "cancelled" {
			t.Fatalf("cancelled capture: %+v %v", res, err)
		}
		// No such interface: an error, nothing written.
		buf.Reset()
		if _, err := Run(context.Background(), Request{Interface: "nope0", Duration: time.Second}, &buf); err == nil || buf.Len() != 0 {
			t.Fatalf("missing interface: %v, %d bytes written", err, buf.Len())
		}
	})
}
