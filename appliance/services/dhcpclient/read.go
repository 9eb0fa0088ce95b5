package dhcpclient

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// readLoop decodes the frames the transport receives and hands them to
// the machine until stop is closed. A failing read is retried after a
// pause that doubles up to 30 s.
func (c *Core[L, F]) readLoop(tr Transport, decode Decoder[F], out chan<- F, stop <-chan struct{}) {
	buf := make([]byte, 1<<16)
	pause := time.Second
	for {
		n, csumValid, err := tr.Read(buf)
		if err != nil {
			select {
			case <-stop:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			c.Fail(fmt.Errorf("read: %w", err))
			select {
			case <-stop:
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
			continue
		}
		pause = time.Second
		f, why := decode(buf[:n], csumValid)
		if why != "" {
			c.Ignore(why)
			continue
		}
		select {
		case out <- f:
		case <-stop:
			return
		default:
			c.Ignore(DropQueueFull)
		}
	}
}
