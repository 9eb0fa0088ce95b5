package dataplane

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/bridge"
	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/rules"
)

// fakeTx is a TX ring in memory: fixed slots, no allocation per frame.
type fakeTx struct {
	slots   [][]byte
	lens    []int
	n       int
	stuck   bool // Flush frees nothing (a dead port)
	sent    [][]byte
	keep    bool // Flush keeps copies of the frames in sent
	flushes int
}

func newFakeTx(nslots int, keep bool) *fakeTx {
	t := &fakeTx{slots: make([][]byte, nslots), lens: make([]int, nslots), keep: keep}
	for i := range t.slots {
		t.slots[i] = make([]byte, 16384)
	}
	return t
}

func (t *fakeTx) Append(b []byte) bool {
	if t.n == len(t.slots) {
		return false
	}
	t.lens[t.n] = copy(t.slots[t.n], b)
	t.n++
	return true
}

func (t *fakeTx) AppendTagged(b []byte, tpid, tci uint16) bool {
	if t.n == len(t.slots) {
		return false
	}
	d := t.slots[t.n]
	copy(d[:12], b[:12])
	binary.BigEndian.PutUint16(d[12:], tpid)
	binary.BigEndian.PutUint16(d[14:], tci)
	t.lens[t.n] = 16 + copy(d[16:], b[12:])
	t.n++
	return true
}

func (t *fakeTx) TxSlot() []byte {
	if t.n == len(t.slots) {
		return nil
	}
	return t.slots[t.n]
}

func (t *fakeTx) TxCommit(n int) bool {
	if t.n == len(t.slots) {
		return false
	}
	t.lens[t.n] = n
	t.n++
	return true
}

func (t *fakeTx) Flush() error {
	t.flushes++
	if t.stuck {
		return errStuck
	}
	if t.keep {
		for i := range t.n {
			t.sent = append(t.sent, append([]byte(nil), t.slots[i][:t.lens[i]]...))
		}
	}
	t.n = 0
	return nil
}

type stuckError struct{}

func (stuckError) Error() string { return "stuck" }

var errStuck error = stuckError{}

// testBridge is a bridge of n data ports (ids 1..n) and, if host, a host
// port (id n+1), with one fwd per port and fake TX rings, sharing one FDB
// and one rule set, as the engine wires them.
type testBridge struct {
	t     testing.TB
	ports []*portInfo
	fwds  []*fwd      // by ingress id
	tx    [][]*fakeTx // [in][out]
	fdb   *bridge.FDB
	set   *rules.Set
	cur   atomic.Pointer[settings]
	cfg   *Config
	clock int64
}

func newTestBridge(t testing.TB, n int, host bool, ruleText string, keep bool, mutate func(*Config)) *testBridge {
	t.Helper()
	cfg := &Config{Mode: ModeBridge}
	for i := range n {
		cfg.Ports = append(cfg.Ports, Port{Name: "p" + string(rune('1'+i)), Interface: "veth" + string(rune('1'+i)), MTU: 1500})
	}
	if host {
		cfg.HostPort = &HostPort{}
	}
	if ruleText != "" {
		rs, err := rules.Parse(ruleText)
		if err != nil {
			t.Fatalf("rules.Parse: %v", err)
		}
		cfg.Rules = rs
	}
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Check(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	b := &testBridge{t: t, cfg: cfg}
	b.ports = make([]*portInfo, 1)
	for i, p := range cfg.Ports {
		pi := &portInfo{id: uint16(i + 1), name: p.portName(), iface: p.Interface, mtu: p.MTU}
		pi.up.Store(true)
		b.ports = append(b.ports, pi)
	}
	if host {
		pi := &portInfo{id: uint16(n + 1), name: cfg.HostPort.portName(), iface: "tap", host: true, mtu: 1500}
		pi.up.Store(true)
		b.ports = append(b.ports, pi)
	}
	var err error
	if b.fdb, err = bridge.New(bridge.Options{AgingTime: time.Duration(cfg.Bridge.AgingTime)}); err != nil {
		t.Fatal(err)
	}
	b.set = rules.NewSet(rules.SetOptions{Workers: len(b.ports)})
	rs := cfg.Rules
	if rs == nil {
		rs = &rules.Ruleset{}
	}
	tab, err := rules.Compile(rs, rules.Options{Ports: cfg.PortNames()})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	b.set.Swap(tab)
	b.cur.Store(newSettings(cfg))
	b.fwds = make([]*fwd, len(b.ports))
	b.tx = make([][]*fakeTx, len(b.ports))
	for _, in := range b.ports[1:] {
		b.tx[in.id] = make([]*fakeTx, len(b.ports))
		tx := make([]txPort, len(b.ports))
		for _, out := range b.ports[1:] {
			f := newFakeTx(8, keep)
			b.tx[in.id][out.id] = f
			tx[out.id] = f
		}
		b.fwds[in.id] = newFwd(in, b.ports, tx, b.fdb, b.set.Worker(int(in.id)-1), &b.cur)
	}
	return b
}

// rx runs one frame through port in as a batch of one and returns what
// each port got (by id).
func (b *testBridge) rx(in uint16, data []byte, stripped bool, tag frame.VLANTag) [][]byte {
	b.clock += int64(time.Millisecond)
	w := b.fwds[in]
	before := make([]int, len(b.ports))
	for id, f := range b.tx[in] {
		if f != nil {
			before[id] = f.n
		}
	}
	w.begin(time.Now().UnixNano(), b.clock)
	w.handle(data, len(data), stripped, tag)
	out := make([][]byte, len(b.ports))
	for id, f := range b.tx[in] {
		if f == nil {
			continue
		}
		if f.n > before[id] {
			i := before[id]
			out[id] = append([]byte(nil), f.slots[i][:f.lens[i]]...)
			if f.n > i+1 {
				b.t.Errorf("port %d got %d frames for one", id, f.n)
			}
		}
	}
	w.flush()
	for _, f := range b.tx[in] {
		if f != nil {
			f.sent = nil
		}
	}
	return out
}

func (b *testBridge) drops() Drops {
	var d Drops
	for _, w := range b.fwds[1:] {
		for r, v := range w.c.drops {
			d[r] += v
		}
	}
	return d
}

// eventually polls cond every 20 ms until it holds, for up to d, and
// fails the test with what and cond's last state if it never does. Call
// it from the test's goroutine only.
func eventually(t testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, d, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Frame fixtures, built with package frametest.

var (
	macA  = [6]byte{0x02, 0, 0, 0, 0, 0xa}
	macB  = [6]byte{0x02, 0, 0, 0, 0, 0xb}
	macC  = [6]byte{0x02, 0, 0, 0, 0, 0xc}
	bcast = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ipA   = [4]byte{10, 0, 0, 1}
	ipB   = [4]byte{10, 0, 0, 2}
)

// tcpFrame is a TCP segment from ipA to ipB carrying "hello"; tags are
// written in the bytes, outermost first.
func tcpFrame(dst, src [6]byte, sport, dport uint16, flags uint8, tags ...frametest.Tag) []byte {
	ip := frametest.IPv4{Src: ipA, Dst: ipB}
	seg := frametest.TCP{SrcPort: sport, DstPort: dport, Flags: flags, Seq: 1000}
	return frametest.Frame(dst, src, frame.EtherTypeIPv4, ip.TCPPacket(seg, []byte("hello")), tags...)
}

// udpFrame is a UDP datagram of n zero bytes from ipA:5000 to ipB, without
// a UDP checksum.
func udpFrame(dst, src [6]byte, dport uint16, n int) []byte {
	ip := frametest.IPv4{Src: ipA, Dst: ipB}
	return frametest.Frame(dst, src, frame.EtherTypeIPv4, ip.UDPPacketNoChecksum(5000, dport, make([]byte, n)))
}

// arpFrame is src asking for ipB on behalf of ipA (not padded).
func arpFrame(dst, src [6]byte) []byte {
	return frametest.Frame(dst, src, frame.EtherTypeARP, frametest.ARP(1, src, ipA, [6]byte{}, ipB))
}
