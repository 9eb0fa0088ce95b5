// Package diag runs the dashboard's network tests from the box's own stack: ping, traceroute (ICMP echo with rising TTLs) and DNS lookups, optionally bound to one interface.
package diag

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// PingOptions configure Ping.
type PingOptions struct {
	Host string
	// Device binds the socket to an interface (SO_BINDTODEVICE); "" uses
	// the routing table.
	Device   string
	Count    int           // default 4
	Size     int           // payload bytes, default 56
	Interval time.Duration // default 1 s
	Timeout  time.Duration // per reply, default 2 s
}

// Reply is one answer, or a timeout (Err set).
type Reply struct {
	Seq   int
	From  netip.Addr
	Bytes int
	TTL   int
	RTT   time.Duration
	Err   string
}

// Summary ends a ping.
type Summary struct {
	Target         netip.Addr
	Sent, Received int
	Min, Avg, Max  time.Duration
}

// Limits of the options.
const (
	MaxCount = 100
	MaxSize  = 1472
)

func (o *PingOptions) defaults() error {
	if o.Count == 0 {
		o.Count = 4
	}
	if o.Size == 0 {
		o.Size = 56
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	switch {
	case o.Count < 1 || o.Count > MaxCount:
		return fmt.Errorf("count: want 1-%d", MaxCount)
	case o.Size < 0 || o.Size > MaxSize:
		return fmt.Errorf("size: want 0-%d bytes", MaxSize)
	case o.Interval < 200*time.Millisecond || o.Interval > 10*time.Second:
		return errors.New("interval: want 0.2-10 s")
	case o.Timeout < 100*time.Millisecond || o.Timeout > 10*time.Second:
		return errors.New("timeout: want 0.1-10 s")
	}
	return nil
}

// resolve4 returns the host's IPv4 address.
func resolve4(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Unmap().Is4() {
			return netip.Addr{}, fmt.Errorf("%s: only IPv4 is supported", host)
		}
		return a.Unmap(), nil
	}
	if host == "" || len(host) > 253 {
		return netip.Addr{}, errors.New("no host given")
	}
	as, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolving %s: %w", host, err)
	}
	return as[0].Unmap(), nil
}

// echoConn is a raw ICMP socket (root) and our echo identifier.
type echoConn struct {
	pc *ipv4.PacketConn
	c  net.PacketConn
	id int
}

func bindControl(device string) func(network, address string, c syscall.RawConn) error {
	if device == "" {
		return nil
	}
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.BindToDevice(int(fd), device) })
		if err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("binding to %s: %w", device, err)
		}
		return nil
	}
}

func openEcho(ctx context.Context, device string) (*echoConn, error) {
	lc := net.ListenConfig{Control: bindControl(device)}
	c, err := lc.ListenPacket(ctx, "ip4:icmp", "0.0.0.0")
	if err != nil {
		return nil, fmt.Errorf("ICMP socket: %w", err)
	}
	pc := ipv4.NewPacketConn(c)
	if err := pc.SetControlMessage(ipv4.FlagTTL, true); err != nil {
		c.Close()
		return nil, fmt.Errorf("ICMP socket: %w", err)
	}
	var b [2]byte
	rand.Read(b[:])
	return &echoConn{pc: pc, c: c, id: int(binary.BigEndian.Uint16(b[:]))}, nil
}

func (e *echoConn) close() { e.c.Close() }

func (e *echoConn) send(dst netip.Addr, seq, size int) error {
	payload := make([]byte, size)
	m := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: e.id, Seq: seq, Data: payload}}
	b, err := m.Marshal(nil)
	if err != nil {
		return err
	}
	_, err = e.pc.WriteTo(b, nil, &net.IPAddr{IP: dst.AsSlice()})
	return err
}

// answer is an ICMP message about one of our echoes.
type answer struct {
	from  netip.Addr
	seq   int
	reply bool // an echo reply (else an error about our echo)
	kind  string
	bytes int
	ttl   int
	at    time.Time
}

// read waits until deadline for an answer to one of our echoes for which
// want returns true.
func (e *echoConn) read(ctx context.Context, deadline time.Time, want func(answer) bool) (answer, bool, error) {
	buf := make([]byte, 1500)
	stop := context.AfterFunc(ctx, func() { e.c.SetReadDeadline(time.Now()) })
	defer stop()
	for {
		if ctx.Err() != nil {
			return answer{}, false, ctx.Err()
		}
		e.c.SetReadDeadline(deadline)
		n, cm, src, err := e.pc.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if ctx.Err() != nil {
				return answer{}, false, ctx.Err()
			}
			return answer{}, false, nil
		}
		if err != nil {
			return answer{}, false, err
		}
		a, ok := e.parse(buf[:n])
		if !ok {
			continue
		}
		a.at = time.Now()
		if ip, ok := src.(*net.IPAddr); ok {
			a.from, _ = netip.AddrFromSlice(ip.IP)
			a.from = a.from.Unmap()
		}
		if cm != nil {
			a.ttl = cm.TTL
		}
		if want(a) {
			return a, true, nil
		}
	}
}

// parse reads an echo reply with our id, or an error message that quotes
// an echo of ours.
func (e *echoConn) parse(b []byte) (answer, bool) {
	m, err := icmp.ParseMessage(1, b)
	if err != nil {
		return answer{}, false
	}
	switch body := m.Body.(type) {
	case *icmp.Echo:
		if m.Type != ipv4.ICMPTypeEchoReply || body.ID != e.id {
			return answer{}, false
		}
		return answer{seq: body.Seq, reply: true, bytes: len(body.Data) + 8}, true
	case *icmp.TimeExceeded:
		return e.quoted(body.Data, "time exceeded")
	case *icmp.DstUnreach:
		return e.quoted(body.Data, fmt.Sprintf("destination unreachable (code %d)", m.Code))
	}
	return answer{}, false
}

// quoted finds our echo in the datagram an ICMP error quotes.
func (e *echoConn) quoted(d []byte, kind string) (answer, bool) {
	if len(d) < 20 {
		return answer{}, false
	}
	ihl := int(d[0]&0x0f) * 4
	if d[9] != 1 || ihl < 20 || len(d) < ihl+8 {
		return answer{}, false
	}
	echo := d[ihl:]
	if echo[0] != 8 || int(binary.BigEndian.Uint16(echo[4:])) != e.id {
		return answer{}, false
	}
	return answer{seq: int(binary.BigEndian.Uint16(echo[6:])), kind: kind}, true
}

// Ping sends echo requests one interval apart and reports each answer.
func Ping(ctx context.Context, o PingOptions, reply func(Reply)) (Summary, error) {
	if err := o.defaults(); err != nil {
		return Summary{}, err
	}
	dst, err := resolve4(ctx, o.Host)
	if err != nil {
		return Summary{}, err
	}
	e, err := openEcho(ctx, o.Device)
	if err != nil {
		return Summary{}, err
	}
	defer e.close()
	sum := Summary{Target: dst}
	var total time.Duration
	for seq := 1; seq <= o.Count; seq++ {
		start := time.Now()
		if err := e.send(dst, seq, o.Size); err != nil {
			reply(Reply{Seq: seq, Err: err.Error()})
			sum.Sent++
		} else {
			sum.Sent++
			a, ok, err := e.read(ctx, start.Add(o.Timeout), func(a answer) bool { return a.seq == seq })
			switch {
			case err != nil:
				return sum, nil // cancelled
			case !ok:
				reply(Reply{Seq: seq, Err: "timeout"})
			case !a.reply:
				reply(Reply{Seq: seq, From: a.from, Err: a.kind})
			default:
				rtt := a.at.Sub(start)
				reply(Reply{Seq: seq, From: a.from, Bytes: a.bytes, TTL: a.ttl, RTT: rtt})
				sum.Received++
				total += rtt
				if sum.Min == 0 || rtt < sum.Min {
					sum.Min = rtt
				}
				sum.Max = max(sum.Max, rtt)
			}
		}
		if seq < o.Count {
			select {
			case <-time.After(time.Until(start.Add(o.Interval))):
			case <-ctx.Done():
				return sum, nil
			}
		}
	}
	if sum.Received > 0 {
		sum.Avg = total / time.Duration(sum.Received)
	}
	return sum, nil
}

// TraceOptions configure Traceroute.
type TraceOptions struct {
	Host    string
	Device  string
	MaxHops int           // default 30, at most 64
	Probes  int           // per hop, default 3, at most 5
	Timeout time.Duration // per probe, default 1 s
}

// Hop is what one TTL found. RTTs has one entry per probe, -1 for a lost
// one.
type Hop struct {
	TTL     int
	Addr    netip.Addr
	RTTs    []time.Duration
	Reached bool
}

// Traceroute sends ICMP echoes with TTL 1, 2, ... and reports who answered
// each, until the target does.
func Traceroute(ctx context.Context, o TraceOptions, hop func(Hop)) error {
	o.MaxHops = cmp.Or(o.MaxHops, 30)
	o.Probes = cmp.Or(o.Probes, 3)
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	switch {
	case o.MaxHops < 1 || o.MaxHops > 64:
		return errors.New("max_hops: want 1-64")
	case o.Probes < 1 || o.Probes > 5:
		return errors.New("probes: want 1-5")
	case o.Timeout < 100*time.Millisecond || o.Timeout > 5*time.Second:
		return errors.New("timeout: want 0.1-5 s")
	}
	dst, err := resolve4(ctx, o.Host)
	if err != nil {
		return err
	}
	e, err := openEcho(ctx, o.Device)
	if err != nil {
		return err
	}
	defer e.close()
	for ttl := 1; ttl <= o.MaxHops; ttl++ {
		if err := e.pc.SetTTL(ttl); err != nil {
			return fmt.Errorf("setting the TTL: %w", err)
		}
		h := Hop{TTL: ttl}
		for p := range o.Probes {
			seq := ttl<<4 | p
			start := time.Now()
			if err := e.send(dst, seq, 32); err != nil {
				return fmt.Errorf("sending to %v: %w", dst, err)
			}
			a, ok, err := e.read(ctx, start.Add(o.Timeout), func(a answer) bool { return a.seq == seq })
			if err != nil {
				return nil // cancelled
			}
			if !ok {
				h.RTTs = append(h.RTTs, -1)
				continue
			}
			h.RTTs = append(h.RTTs, a.at.Sub(start))
			h.Addr = a.from
			h.Reached = h.Reached || (a.reply && a.from == dst)
		}
		hop(h)
		if h.Reached {
			return nil
		}
	}
	return nil
}
