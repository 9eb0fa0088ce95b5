package wanclient

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"e1kbox/appliance/services/dhcpclient"
)

// The unit tests drive a Client through a fake clock and a fake transport:
// the test reads every frame the client sends and answers as a server.

// fakeClock is a clock that moves only when the test says so. Timers are
// absolute: one armed for a time already passed fires at once.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newFakeClock() *fakeClock { return &fakeClock{now: epoch} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Timer(at time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: at, ch: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.ch <- c.now
		return t.ch, func() {}
	}
	c.timers = append(c.timers, t)
	return t.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return
			}
		}
	}
}

// Set moves the clock to t (never back) and fires the timers due.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.Before(c.now) {
		panic("fake clock moved back")
	}
	c.now = t
	kept := c.timers[:0]
	for _, x := range c.timers {
		if !x.at.After(t) {
			x.ch <- t
		} else {
			kept = append(kept, x)
		}
	}
	c.timers = kept
}

// At moves the clock to epoch+d.
func (c *fakeClock) At(d time.Duration) { c.Set(epoch.Add(d)) }

// fakeTransport hands the test what the client sends and the client what
// the test delivers.
type fakeTransport struct {
	in        chan []byte
	out       chan sentFrame
	closed    chan struct{}
	closeOnce sync.Once
}

type sentFrame struct {
	frame []byte
	dst   net.HardwareAddr
}

func newFakeTransport() *fakeTransport {
	return &fakeTransport{in: make(chan []byte, 64), out: make(chan sentFrame, 256), closed: make(chan struct{})}
}

func (t *fakeTransport) Read(b []byte) (int, bool, error) {
	select {
	case f := <-t.in:
		return copy(b, f), false, nil
	case <-t.closed:
		return 0, false, net.ErrClosed
	}
}

func (t *fakeTransport) Write(frame []byte, dst net.HardwareAddr) error {
	select {
	case <-t.closed:
		return net.ErrClosed
	default:
	}
	select {
	case t.out <- sentFrame{append([]byte(nil), frame...), append(net.HardwareAddr(nil), dst...)}:
		return nil
	default:
		return errors.New("fake transport: nobody reads what the client sends")
	}
}

func (t *fakeTransport) Close() error {
	t.closeOnce.Do(func() { close(t.closed) })
	return nil
}

var (
	clientMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	serverMAC = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0xfe}
	otherMAC  = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x77}
	serverIP  = netip.MustParseAddr("192.0.2.1")
	leaseIP   = netip.MustParseAddr("192.0.2.100")
)

// leaseCmp compares Leases (netip values compare with ==, times with Equal).
var leaseCmp = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// env is a client under test with its fakes.
type env struct {
	t       *testing.T
	clk     *fakeClock
	tr      *fakeTransport
	c       *Client
	changes chan change
	done    chan error
	cancel  context.CancelFunc
	opens   int
	mu      sync.Mutex
}

type change struct{ old, new *Lease }

// newEnv returns a client on fakes, not yet running; jitter is 0.
func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	cfg := Config{Interface: "wan0", MAC: clientMAC, Hostname: "e1kbox", LeaseFile: t.TempDir() + "/wan.lease"}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, clk: newFakeClock(), tr: newFakeTransport(), c: c, changes: make(chan change, 16)}
	c.core.Clock = e.clk
	c.jitter = func() time.Duration { return 0 }
	c.core.Open = func() (dhcpclient.Transport, int, error) {
		e.mu.Lock()
		e.opens++
		e.mu.Unlock()
		return e.tr, 1500, nil
	}
	return e
}

// testWriter sends the client's log to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(b[:len(b)-1]))
	return len(b), nil
}

// run starts Run; the test's cleanup stops it, checks it returned nil and
// waits for it.
func (e *env) run() {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.done = make(chan error, 1)
	go func() {
		e.done <- e.c.Run(ctx, func(old, new *Lease) {
			select {
			case e.changes <- change{old, new}:
			case <-ctx.Done(): // the test is over: nobody reads
			}
		})
	}()
	e.t.Cleanup(func() {
		cancel()
		if err := e.wait(); err != nil {
			e.t.Errorf("Run: %v", err)
		}
		<-e.done // joined, also when wait gave up on it
	})
}

// wait waits for Run to return.
func (e *env) wait() error {
	select {
	case err := <-e.done:
		e.done <- err // later waits see it too
		return err
	case <-time.After(5 * time.Second):
		return errors.New("Run did not return")
	}
}

// sent is a frame the client sent, decoded.
type sent struct {
	dstMAC, srcMAC net.HardwareAddr
	srcIP, dstIP   netip.Addr
	msg            *dhcpv4.DHCPv4
}

func (s sent) typ() dhcpv4.MessageType { return s.msg.MessageType() }

// next waits for the next frame the client sends and decodes it, checking
// its headers and checksums as a server would.
func (e *env) next() sent {
	e.t.Helper()
	select {
	case f := <-e.tr.out:
		u, why := dhcpclient.DecodeIPv4(f.frame, serverPort, false)
		if why != "" {
			e.t.Fatalf("client sent a bad frame (%s): %x", why, f.frame)
		}
		if u.SrcPort != clientPort {
			e.t.Fatalf("client sent from port %d", u.SrcPort)
		}
		if !macEqual(f.dst, u.DstMAC) || !macEqual(u.SrcMAC, clientMAC) {
			e.t.Fatalf("frame %s -> %s written to %s", u.SrcMAC, u.DstMAC, f.dst)
		}
		msg, err := dhcpv4.FromBytes(u.Payload)
		if err != nil {
			e.t.Fatalf("client sent no DHCP message: %v", err)
		}
		return sent{dstMAC: u.DstMAC, srcMAC: u.SrcMAC, srcIP: u.SrcIP, dstIP: u.DstIP, msg: msg}
	case <-time.After(5 * time.Second):
		e.t.Fatalf("at %v: the client sent nothing (state %s)", e.clk.Now().Sub(epoch), e.c.Stats().State)
		return sent{}
	}
}

// expect waits for the next frame and checks its message type.
func (e *env) expect(t dhcpv4.MessageType) sent {
	e.t.Helper()
	s := e.next()
	if s.typ() != t {
		e.t.Fatalf("at %v: client sent %s, want %s", e.clk.Now().Sub(epoch), s.typ(), t)
	}
	return s
}

// quiet checks that the client sends nothing for a while (real time).
func (e *env) quiet() {
	e.t.Helper()
	select {
	case f := <-e.tr.out:
		e.t.Fatalf("at %v: unexpected frame %x", e.clk.Now().Sub(epoch), f.frame)
	case <-time.After(30 * time.Millisecond):
	}
}

// change waits for onChange.
func (e *env) change() change {
	e.t.Helper()
	select {
	case c := <-e.changes:
		return c
	case <-time.After(5 * time.Second):
		e.t.Fatalf("no onChange (state %s)", e.c.Stats().State)
		return change{}
	}
}

// noChange checks that onChange was not called.
func (e *env) noChange() {
	e.t.Helper()
	select {
	case c := <-e.changes:
		e.t.Fatalf("unexpected onChange(%+v, %+v)", c.old, c.new)
	default:
	}
}

// waitState waits until the client is in state s.
func (e *env) waitState(s string) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.c.Stats().State != s {
		if time.Now().After(deadline) {
			e.t.Fatalf("state %s, want %s", e.c.Stats().State, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// deliver hands a frame to the client as if received.
func (e *env) deliver(frame []byte) { e.tr.in <- frame }

// fakeServer builds the replies of a DHCP server.
type fakeServer struct {
	mac net.HardwareAddr
	ip  netip.Addr
}

var srv = fakeServer{mac: serverMAC, ip: serverIP}

// leaseOpts are a typical ISP lease's options: 1000 s, no T1/T2.
func leaseOpts() []dhcpv4.Option {
	return []dhcpv4.Option{
		dhcpv4.OptSubnetMask(net.CIDRMask(24, 32)),
		dhcpv4.OptRouter(net.IPv4(192, 0, 2, 1)),
		dhcpv4.OptDNS(net.IPv4(192, 0, 2, 53), net.IPv4(192, 0, 2, 54)),
		dhcpv4.OptDomainName("isp.example"),
		dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{0x05, 0x78}), // 1400
		dhcpv4.OptNTPServers(net.IPv4(192, 0, 2, 123)),
		dhcpv4.OptIPAddressLeaseTime(1000 * time.Second),
	}
}

// msg builds a BOOTREPLY of type t to req for yiaddr.
func (s fakeServer) msg(req *dhcpv4.DHCPv4, t dhcpv4.MessageType, yiaddr netip.Addr, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	d := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        iana.HWTypeEthernet,
		TransactionID: req.TransactionID,
		ClientIPAddr:  req.ClientIPAddr,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IP(s.ip.AsSlice()),
		GatewayIPAddr: net.IPv4zero,
		ClientHWAddr:  req.ClientHWAddr,
		Options:       dhcpv4.Options{},
	}
	if yiaddr.IsValid() {
		d.YourIPAddr = net.IP(yiaddr.AsSlice())
	}
	d.UpdateOption(dhcpv4.OptMessageType(t))
	d.UpdateOption(dhcpv4.OptServerIdentifier(net.IP(s.ip.AsSlice())))
	for _, o := range opts {
		d.UpdateOption(o)
	}
	return d
}

// frame wraps a reply for the client's MAC, IP destination dst.
func (s fakeServer) frame(m *dhcpv4.DHCPv4, dst netip.Addr) []byte {
	f := dhcpclient.Frame{
		DstMAC: m.ClientHWAddr, SrcMAC: s.mac,
		SrcIP: s.ip, DstIP: dst,
		SrcPort: serverPort, DstPort: clientPort,
		Payload: m.ToBytes(),
	}
	return f.Marshal()
}

// reply answers req with a frame of type t.
func (s fakeServer) reply(req sent, t dhcpv4.MessageType, yiaddr netip.Addr, opts ...dhcpv4.Option) []byte {
	return s.frame(s.msg(req.msg, t, yiaddr, opts...), yiaddr)
}

// wantLease is the lease leaseOpts grants, obtained at epoch+at.
func wantLease(at time.Duration) *Lease {
	o := epoch.Add(at)
	return &Lease{
		Addr:      netip.PrefixFrom(leaseIP, 24),
		Gateway:   netip.MustParseAddr("192.0.2.1"),
		DNS:       []netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("192.0.2.54")},
		Domain:    "isp.example",
		MTU:       1400,
		NTP:       []netip.Addr{netip.MustParseAddr("192.0.2.123")},
		Server:    serverIP,
		ServerMAC: serverMAC,
		Obtained:  o,
		T1:        o.Add(500 * time.Second),
		T2:        o.Add(875 * time.Second),
		Expiry:    o.Add(1000 * time.Second),
	}
}

// dora runs DISCOVER, OFFER, REQUEST, ACK at the current time and returns
// the lease onChange reported.
func (e *env) dora() *Lease {
	e.t.Helper()
	d := e.expect(dhcpv4.MessageTypeDiscover)
	e.deliver(srv.reply(d, dhcpv4.MessageTypeOffer, leaseIP, leaseOpts()...))
	r := e.expect(dhcpv4.MessageTypeRequest)
	e.deliver(srv.reply(r, dhcpv4.MessageTypeAck, leaseIP, leaseOpts()...))
	ch := e.change()
	if ch.old != nil || ch.new == nil {
		e.t.Fatalf("onChange(%v, %v) after the first ACK, want (nil, lease)", ch.old, ch.new)
	}
	e.waitState("bound")
	return ch.new
}

// option returns a message's option as bytes (nil when absent).
func option(m *dhcpv4.DHCPv4, code uint8) []byte {
	return m.Options.Get(dhcpv4.GenericOptionCode(code))
}

// optionCodes lists the codes of a message's options, sorted.
func optionCodes(m *dhcpv4.DHCPv4) []int {
	var codes []int
	for c := range m.Options {
		codes = append(codes, int(c))
	}
	sort.Ints(codes)
	return codes
}

// diffStats compares counter maps, treating nil as empty.
func diffStats(want, got map[string]uint64) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}
