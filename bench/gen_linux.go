package main

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/afpacket"
)

// genSpec describes a traffic generator.
type genSpec struct {
	NS    string // network namespace
	Iface string
	CPU   int // pin the generator thread; -1: unpinned
	Frame []byte
	Flows int     // source ports cycled through, 1..maxFlows
	Rate  float64 // frames per second; 0 is as fast as possible
	// Ring sends from a mapped TX ring (tpacket_snd) instead of sendmmsg
	// from process memory. Its frames carry the ring's destructor and
	// zero-copy fragments: whoever frees them (the box's CPU, for a
	// userspace forwarder) updates the generator's ring, and veth copies
	// the fragments out. A NIC's frames have neither, so copy is the
	// default.
	Ring bool
	// Stamp writes the send time into each frame (putStamp), read
	// per frame just before the frame is queued.
	Stamp bool
	// Fresh gives every frame a 5-tuple of its own (setFresh) instead of
	// cycling through Flows: each is a new connection.
	Fresh bool
	// FreshBase is the first Fresh tuple's number.
	FreshBase uint64
	// IPv6: Frame is a udpFrame6 (flows by setFlow6; no Fresh or Stamp).
	IPv6 bool
	// Tick is a paced generator's sleep (0: genTick); shorter ticks send
	// smaller bursts.
	Tick time.Duration
}

// Generator pacing and batching.
const (
	genBatch    = 256              // frames per send (sendmmsg or sendto) at full speed
	genTxFrames = 4096             // TX ring slots
	genTick     = time.Millisecond // a paced generator's sleep
)

// generator sends frames from an AF_PACKET TX ring on a thread pinned to
// one CPU in the generator namespace, until Stop.
type generator struct {
	sock    atomic.Pointer[afpacket.Socket]
	stop    atomic.Bool
	stalled atomic.Uint64
	tid     atomic.Int64 // the sending thread's id
	done    chan error
}

// startGenerator opens the ring and starts sending; it returns once the
// socket is open (or failed to open).
func startGenerator(spec genSpec) (*generator, error) {
	if spec.Flows < 1 || spec.Flows > maxFlows {
		return nil, fmt.Errorf("generator: %d flows outside 1..%d", spec.Flows, maxFlows)
	}
	g := &generator{done: make(chan error, 1)}
	opened := make(chan error, 1)
	go func() {
		g.done <- inNetns(spec.NS, func() error {
			if spec.CPU >= 0 {
				var set unix.CPUSet
				set.Set(spec.CPU)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					opened <- fmt.Errorf("generator: pin to cpu%d: %w", spec.CPU, err)
					return nil
				}
			}
			g.tid.Store(int64(unix.Gettid()))
			s, err := afpacket.Open(spec.Iface, afpacket.Config{NoRX: true, TxFrames: genTxFrames, TxCopy: !spec.Ring})
			if err != nil {
				opened <- fmt.Errorf("generator: %w", err)
				return nil
			}
			defer s.Close()
			g.sock.Store(s)
			opened <- nil
			return g.loop(s, spec)
		})
	}()
	if err := <-opened; err != nil {
		<-g.done
		return nil, err
	}
	return g, nil
}

func (g *generator) loop(s *afpacket.Socket, spec genSpec) error {
	var (
		flow   int
		queued uint64 // frames committed to the ring
		start  = time.Now()
		tick   = spec.Tick
	)
	if tick == 0 {
		tick = genTick
	}
	for !g.stop.Load() {
		n := genBatch
		if spec.Rate > 0 {
			due := int64(spec.Rate*time.Since(start).Seconds()) - int64(queued)
			if due <= 0 {
				// Sleep in the kernel on this thread: a Go timer would
				// wake the goroutine through another thread (a futex
				// handoff per tick, charged to the measured CPU time).
				ts := unix.NsecToTimespec(int64(tick))
				unix.Nanosleep(&ts, nil)
				continue
			}
			n = int(min(due, genTxFrames))
		}
		for range n {
			b := s.TxSlot()
			if b == nil {
				break // ring full: flush first
			}
			copy(b, spec.Frame)
			if spec.IPv6 {
				setFlow6(b, flow)
			} else if spec.Fresh {
				setFresh(b, spec.FreshBase+queued)
			} else {
				setFlow(b, flow)
			}
			if flow++; flow == spec.Flows {
				flow = 0
			}
			if spec.Stamp {
				putStamp(b, time.Now().UnixNano())
			}
			if !s.TxCommit(len(spec.Frame)) {
				return fmt.Errorf("generator: frame of %d bytes refused by the TX ring", len(spec.Frame))
			}
			queued++
		}
		if err := s.Flush(); err != nil {
			if errors.Is(err, afpacket.ErrTxStalled) {
				g.stalled.Add(1)
				continue
			}
			if errors.Is(err, afpacket.ErrClosed) {
				return nil
			}
			return fmt.Errorf("generator: %w", err)
		}
	}
	return nil
}

// Sent is the number of frames the kernel took so far.
func (g *generator) Sent() uint64 {
	if s := g.sock.Load(); s != nil {
		return s.Stats().TxSent
	}
	return 0
}

// Stop stops sending and returns the generator's error, if any.
func (g *generator) Stop() error {
	g.stop.Store(true)
	return <-g.done
}

// sendFrames sends frames once from iface in ns (used to let bridges
// learn the sink's address).
func sendFrames(ns, iface string, frames ...[]byte) error {
	return inNetns(ns, func() error {
		s, err := afpacket.Open(iface, afpacket.Config{NoRX: true, TxFrames: 16})
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		defer s.Close()
		for _, f := range frames {
			if !s.Append(f) {
				return fmt.Errorf("send on %s: frame of %d bytes not queued", iface, len(f))
			}
		}
		if err := s.Flush(); err != nil {
			return fmt.Errorf("send on %s: %w", iface, err)
		}
		return nil
	})
}
