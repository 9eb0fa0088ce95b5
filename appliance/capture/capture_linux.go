package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// Request is one capture.
type Request struct {
	Interface string
	Filter    Filter
	// Bounds: the capture ends at the first one reached.
	MaxPackets int
	MaxBytes   int64 // of the file
	Duration   time.Duration
	Snaplen    int
}

// Result says what was captured and why it ended.
type Result struct {
	Packets int
	Bytes   int64 // the file's size
	// Ended is "count", "size", "time" or "cancelled".
	Ended string
}

// Run captures on req.Interface into w (a pcapng file) with its own
// AF_PACKET socket whose kernel filter passes only matching frames. It
// writes nothing when it cannot start (no such interface, a bad filter).
func Run(ctx context.Context, req Request, w io.Writer) (Result, error) {
	if req.Snaplen <= 0 || req.Snaplen > 65535 {
		req.Snaplen = 65535
	}
	ifi, err := net.InterfaceByName(req.Interface)
	if err != nil {
		return Result{}, fmt.Errorf("capture on %q: %w", req.Interface, err)
	}
	prog, err := req.Filter.program(req.Snaplen)
	if err != nil {
		return Result{}, fmt.Errorf("capture filter: %w", err)
	}
	c, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ALL, &packet.Config{Filter: prog})
	if err != nil {
		return Result{}, fmt.Errorf("capture on %s: %w", req.Interface, err)
	}
	defer c.Close()
	pw, err := NewWriter(w, req.Interface, req.Snaplen, "e1kbox")
	if err != nil {
		return Result{}, err
	}
	res := Result{Bytes: pw.Written()}
	deadline := time.Now().Add(req.Duration)
	stop := context.AfterFunc(ctx, func() { c.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 65536)
	for {
		switch {
		case ctx.Err() != nil:
			res.Ended = "cancelled"
			return res, nil
		case req.MaxPackets > 0 && res.Packets >= req.MaxPackets:
			res.Ended = "count"
			return res, nil
		case !time.Now().Before(deadline):
			res.Ended = "time"
			return res, nil
		}
		c.SetReadDeadline(deadline)
		n, _, err := c.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("capture on %s: %w", req.Interface, err)
		}
		if req.MaxBytes > 0 && pw.Written()+pw.PacketSize(n) > req.MaxBytes {
			res.Ended = "size"
			return res, nil
		}
		if err := pw.WritePacket(time.Now(), buf[:n], n); err != nil {
			return res, err
		}
		res.Packets++
		res.Bytes = pw.Written()
	}
}
