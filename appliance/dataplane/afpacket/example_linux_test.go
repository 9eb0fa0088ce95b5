package afpacket_test

import (
	"errors"
	"log/slog"
	"time"

	"e1kbox/appliance/dataplane/afpacket"
)

// A minimal two-port forwarder: every frame received on eth1 goes out on
// eth2 with its VLAN tag restored, one Flush per RX block. (A real worker
// runs one such loop per direction, each on its own goroutine.)
func Example() {
	in, err := afpacket.Open("eth1", afpacket.Config{})
	if err != nil {
		slog.Error("open", "err", err)
		return
	}
	defer in.Close()
	out, err := afpacket.Open("eth2", afpacket.Config{})
	if err != nil {
		slog.Error("open", "err", err)
		return
	}
	defer out.Close()

	var p afpacket.Packet
	forward := func() bool {
		if p.HasVLAN {
			return out.AppendTagged(p.Data, p.VLANTPID, p.VLANTCI)
		}
		return out.Append(p.Data)
	}
	for {
		b, err := in.NextBlock(100 * time.Millisecond)
		if errors.Is(err, afpacket.ErrClosed) {
			return
		}
		if err != nil {
			slog.Warn("receive", "err", err)
			continue
		}
		if b == nil {
			continue // timeout: a place to pick up a new config snapshot
		}
		for b.Next(&p) {
			if !forward() && out.Flush() == nil {
				forward() // the ring was full; a second failure is a drop
			}
		}
		in.ReleaseBlock()
		if err := out.Flush(); err != nil {
			slog.Warn("transmit", "err", err)
		}
	}
}
