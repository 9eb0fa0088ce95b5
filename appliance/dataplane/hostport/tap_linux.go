// Package hostport attaches the box's own network stack to the userspace bridge through a TAP device.
//
// The kernel side of the TAP is an ordinary interface that holds the box's
// management address; the dataplane reads the frames the kernel sends on it
// (read on the TAP descriptor) and hands it the frames bridged to it (write).
// An AF_PACKET ring on the TAP would not do: its TX side transmits out of
// the TAP, i.e. back to the descriptor, never into the kernel's stack.
package hostport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/pollwait"
)

// ErrClosed is returned once the port was closed.
var ErrClosed = errors.New("hostport: closed")

// DefaultName is the TAP interface name when Config.Name is empty.
const DefaultName = "e1khost0"

// Config configures Open.
type Config struct {
	// Name is the TAP interface name (default DefaultName).
	Name string
	// MTU of the kernel side; 0 keeps the TAP default (1500).
	MTU int
	// MAC is the kernel side's address; nil keeps the random one the
	// kernel picks.
	MAC net.HardwareAddr
	// Addrs are the kernel's addresses on the port (IPv6 ones without
	// duplicate address detection, so they are usable at once).
	Addrs []netip.Prefix
}

// Stats are the port's counters.
type Stats struct {
	Read, Written           uint64 // frames
	ReadErrors              uint64
	WriteErrors             uint64 // frames the kernel refused (counted, dropped)
	ReadBytes, WrittenBytes uint64
}

// Port is an open TAP device. Read, Wait and Write may be called from any
// goroutine; a frame is one read or one write (the kernel keeps them
// atomic). Close wakes a goroutine blocked in Wait; the descriptor is
// released when the last call in flight returns.
type Port struct {
	name    string
	ifindex int
	mtu     int
	mac     net.HardwareAddr

	fd   int
	wait *pollwait.Waiter // on fd, for Wait; Close and Wake wake it
	refs atomic.Int64     // closedBit | calls in flight
	once sync.Once

	read, written, readErrs, writeErrs, readBytes, wrBytes atomic.Uint64
}

const closedBit = 1 << 62

// Open creates the TAP device (IFF_TAP|IFF_NO_PI) in the calling thread's
// network namespace, configures MTU, MAC and addresses and sets it up. The
// device disappears when the port is closed.
func Open(cfg Config) (*Port, error) {
	name := cfg.Name
	if name == "" {
		name = DefaultName
	}
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("hostport: interface name %q longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("hostport: open /dev/net/tun: %w", err)
	}
	p := &Port{fd: fd}
	if err := p.setup(name, cfg); err != nil {
		p.teardown()
		return nil, fmt.Errorf("hostport: %s: %w", name, err)
	}
	return p, nil
}

func (p *Port) setup(name string, cfg Config) error {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return fmt.Errorf("ifreq: %w", err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(p.fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("TUNSETIFF: %w", err)
	}
	p.name = ifr.Name()
	if p.wait, err = pollwait.New(p.name, nil, p.fd); err != nil {
		return err
	}
	link, err := netlink.LinkByName(p.name)
	if err != nil {
		return fmt.Errorf("link: %w", err)
	}
	if cfg.MTU > 0 {
		if err := netlink.LinkSetMTU(link, cfg.MTU); err != nil {
			return fmt.Errorf("set MTU %d: %w", cfg.MTU, err)
		}
	}
	if cfg.MAC != nil {
		if err := netlink.LinkSetHardwareAddr(link, cfg.MAC); err != nil {
			return fmt.Errorf("set MAC %s: %w", cfg.MAC, err)
		}
	}
	for _, a := range cfg.Addrs {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())}}
		if a.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("add address %s: %w", a, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	if link, err = netlink.LinkByName(p.name); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	p.ifindex = link.Attrs().Index
	p.mtu = link.Attrs().MTU
	p.mac = link.Attrs().HardwareAddr
	return nil
}

func (p *Port) teardown() error {
	var errs []error
	if p.fd >= 0 {
		if err := unix.Close(p.fd); err != nil {
			errs = append(errs, fmt.Errorf("close tap: %w", err))
		}
		p.fd = -1
	}
	if p.wait != nil {
		if err := p.wait.Close(); err != nil {
			errs = append(errs, err)
		}
		p.wait = nil
	}
	return errors.Join(errs...)
}

// Name is the TAP interface name.
func (p *Port) Name() string { return p.name }

// Ifindex is the interface index.
func (p *Port) Ifindex() int { return p.ifindex }

// MTU is the interface MTU at Open.
func (p *Port) MTU() int { return p.mtu }

// MAC is the kernel side's Ethernet address.
func (p *Port) MAC() net.HardwareAddr { return p.mac }

func (p *Port) acquire() bool {
	if p.refs.Add(1)&closedBit != 0 {
		p.release()
		return false
	}
	return true
}

func (p *Port) release() {
	if p.refs.Add(-1) == closedBit {
		p.once.Do(func() { p.teardown() })
	}
}

// Read reads one frame the kernel sent into buf without blocking. It
// returns the frame length, or 0 and false when no frame is waiting. A frame
// longer than buf is cut to len(buf) and its full length returned, so
// n > len(buf) tells the caller it was truncated.
func (p *Port) Read(buf []byte) (n int, ok bool, err error) {
	if !p.acquire() {
		return 0, false, ErrClosed
	}
	defer p.release()
	for {
		n, err = unix.Read(p.fd, buf)
		switch {
		case err == nil:
			p.read.Add(1)
			p.readBytes.Add(uint64(n))
			return n, true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0, false, nil
		}
		p.readErrs.Add(1)
		return 0, false, fmt.Errorf("hostport: %s: read: %w", p.name, err)
	}
}

// Wait blocks until a frame can be read, the timeout passes (a negative
// timeout waits without limit) or the port is closed (ErrClosed). It parks
// the goroutine in the runtime's netpoller (package pollwait says why),
// and is for one goroutine at a time.
func (p *Port) Wait(timeout time.Duration) error {
	if !p.acquire() {
		return ErrClosed
	}
	defer p.release()
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	ev, err := p.wait.Wait(deadline)
	switch {
	case p.refs.Load()&closedBit != 0:
		return ErrClosed
	case ev.Woken():
		return nil // Wake
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil
	case err != nil:
		return fmt.Errorf("hostport: %s: %w", p.name, err)
	}
	return nil
}

// Wake makes a Wait in progress, or the next one, return at once as its
// timeout would. Any goroutine may call it; it returns ErrClosed after
// Close.
func (p *Port) Wake() error {
	if !p.acquire() {
		return ErrClosed
	}
	defer p.release()
	if err := p.wait.Wake(); err != nil {
		return fmt.Errorf("hostport: %s: wake: %w", p.name, err)
	}
	return nil
}

// Write hands one frame to the kernel as if it had arrived on the port.
func (p *Port) Write(frame []byte) error {
	if !p.acquire() {
		return ErrClosed
	}
	defer p.release()
	for {
		_, err := unix.Write(p.fd, frame)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			p.writeErrs.Add(1)
			return fmt.Errorf("hostport: %s: write: %w", p.name, err)
		}
		p.written.Add(1)
		p.wrBytes.Add(uint64(len(frame)))
		return nil
	}
}

// Stats returns the port's counters.
func (p *Port) Stats() Stats {
	return Stats{
		Read: p.read.Load(), Written: p.written.Load(),
		ReadErrors: p.readErrs.Load(), WriteErrors: p.writeErrs.Load(),
		ReadBytes: p.readBytes.Load(), WrittenBytes: p.wrBytes.Load(),
	}
}

// Close closes the port: Wait returns ErrClosed at once and the TAP
// disappears when no call is in flight any more. It is safe to call more
// than once.
func (p *Port) Close() error {
	p.refs.Add(1)
	for {
		old := p.refs.Load()
		if old&closedBit != 0 {
			p.release()
			return nil
		}
		if p.refs.CompareAndSwap(old, old|closedBit) {
			break
		}
	}
	err := p.wait.Wake()
	p.release()
	if err != nil {
		return fmt.Errorf("hostport: %s: wake poller: %w", p.name, err)
	}
	return nil
}
