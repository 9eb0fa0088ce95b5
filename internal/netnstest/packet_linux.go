package netnstest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Packets is a raw AF_PACKET socket on one interface of a namespace: it
// sends frames as they are and, when capturing, records every frame the
// interface receives (not those it sends) until Close.
type Packets struct {
	fd   int
	addr unix.SockaddrLinklayer

	mu     sync.Mutex
	frames [][]byte
	done   chan struct{}
	closed atomic.Bool
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// OpenPackets opens a raw socket on iface in ns; capture starts recording
// received frames at once. Close it (the test's cleanup does).
func (ns *Namespace) OpenPackets(t testing.TB, iface string, capture bool) *Packets {
	t.Helper()
	p := &Packets{fd: -1}
	ns.Do(t, func() {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			t.Fatalf("netnstest: %s in %s: %v", iface, ns.name, err)
		}
		proto := 0
		if capture {
			proto = int(htons(unix.ETH_P_ALL))
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			t.Fatalf("netnstest: packet socket: %v", err)
		}
		p.fd = fd
		p.addr = unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index}
		if capture {
			unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
			tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
			unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		}
		if err := unix.Bind(fd, &p.addr); err != nil {
			unix.Close(fd)
			t.Fatalf("netnstest: bind to %s: %v", iface, err)
		}
	})
	if capture {
		p.done = make(chan struct{})
		go p.read()
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func (p *Packets) read() {
	defer close(p.done)
	buf := make([]byte, 65536)
	for {
		n, _, err := unix.Recvfrom(p.fd, buf, 0)
		switch {
		case p.closed.Load():
			return
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			return
		}
		p.mu.Lock()
		p.frames = append(p.frames, bytes.Clone(buf[:n]))
		p.mu.Unlock()
	}
}

// Send sends each frame (Ethernet header included) as it is.
func (p *Packets) Send(t testing.TB, frames ...[]byte) {
	t.Helper()
	for _, f := range frames {
		if err := unix.Sendto(p.fd, f, 0, &p.addr); err != nil {
			t.Fatalf("netnstest: send: %v", err)
		}
	}
}

// Frames returns the frames received so far, in order.
func (p *Packets) Frames() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.frames...)
}

// Wait returns the frames received once none came for quiet, or at most
// after limit.
func (p *Packets) Wait(quiet, limit time.Duration) [][]byte {
	end := time.Now().Add(limit)
	n, since := -1, time.Now()
	for time.Now().Before(end) {
		p.mu.Lock()
		m := len(p.frames)
		p.mu.Unlock()
		if m != n {
			n, since = m, time.Now()
		} else if time.Since(since) >= quiet {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p.Frames()
}

// Reset forgets the frames received so far.
func (p *Packets) Reset() {
	p.mu.Lock()
	p.frames = nil
	p.mu.Unlock()
}

// Close closes the socket (and ends the capture).
func (p *Packets) Close() error {
	if p.fd < 0 || p.closed.Swap(true) {
		return nil
	}
	if p.done != nil {
		<-p.done // within the receive timeout
	}
	return unix.Close(p.fd)
}
