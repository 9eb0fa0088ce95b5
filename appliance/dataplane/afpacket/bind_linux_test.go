package afpacket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// otherEtherType is a test EtherType no binding names.
const otherEtherType = 0x88b6

// withType is a test frame of EtherType typ instead of testEtherType.
func withType(f []byte, typ uint16) []byte {
	binary.BigEndian.PutUint16(f[12:], typ)
	return f
}

// byType counts the frames of each EtherType NextBlock returns from s
// until want frames arrived or timeout passed; batches records the
// EtherTypes of each batch in order.
func byType(s *Socket, want int, timeout time.Duration) (counts map[uint16]int, batches [][]uint16, err error) {
	counts = map[uint16]int{}
	n := 0
	err = readBlocks(s, timeout, func(b *Block, p *Packet) bool {
		var batch []uint16
		for b.Next(p) {
			typ := binary.BigEndian.Uint16(p.Data[12:])
			counts[typ]++
			batch = append(batch, typ)
			n++
		}
		batches = append(batches, batch)
		return n < want
	})
	return counts, batches, err
}

// TestBind: a socket bound to two EtherTypes receives both, each on its
// own ring, and nothing else; its statistics count both rings.
func TestBind(t *testing.T) {
	for _, ring := range []struct {
		name string
		cfg  Config
	}{
		{"frames", Config{FrameRing: true, RxFrames: 1024}},
		{"blocks", Config{BlockSize: 64 << 10, BlockCount: 8}},
	} {
		t.Run(ring.name, func(t *testing.T) {
			v := newVeth(t, 1500)
			cfg := ring.cfg
			cfg.Bind = []Binding{{EtherType: unix.ETH_P_IP}, {EtherType: testEtherType, Frames: 128}}
			s := v.open(t, vethB, cfg)
			peer := v.plain(t, vethA)
			const ip4, test, other = 300, 40, 25
			for i := range ip4 {
				peer.send(t, udpFrame(uint16(i%8), uint32(i)))
			}
			for i := range test {
				peer.send(t, testFrame(macB, macA, 1, uint32(i), 80))
			}
			for i := range other {
				peer.send(t, withType(testFrame(macB, macA, 2, uint32(i), 80), otherEtherType))
			}
			counts, _, err := byType(s, ip4+test+other, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			want := map[uint16]int{unix.ETH_P_IP: ip4, testEtherType: test}
			if fmt.Sprint(counts) != fmt.Sprint(want) {
				t.Errorf("frames by EtherType %v, want %v (none of %#04x)", counts, want, otherEtherType)
			}
			if st := s.Stats(); st.RxPackets != ip4+test {
				t.Errorf("Stats().RxPackets = %d, want %d over both rings", st.RxPackets, ip4+test)
			}
		})
	}
}

// TestBindTakesTurns: a ring full of one EtherType does not keep the
// frames of another waiting behind it; NextBlock takes the rings in turn.
func TestBindTakesTurns(t *testing.T) {
	v := newVeth(t, 1500)
	s := v.open(t, vethB, Config{FrameRing: true, RxFrames: 2048,
		Bind: []Binding{{EtherType: unix.ETH_P_IP}, {EtherType: testEtherType, Frames: 128}}})
	peer := v.plain(t, vethA)
	const ip4 = 4 * maxBatch
	for i := range ip4 {
		peer.send(t, udpFrame(uint16(i%8), uint32(i)))
	}
	peer.send(t, testFrame(macB, macA, 1, 0, 80))
	// Both rings hold their frames before the first NextBlock.
	deadline := time.Now().Add(2 * time.Second)
	for s.Stats().RxPackets < ip4+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	_, batches, err := byType(s, ip4+1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	for i, b := range batches {
		if len(b) > 0 && b[0] == testEtherType {
			at = i
			break
		}
	}
	if at < 0 || at > 1 {
		t.Errorf("the test frame came in batch %d of %d, want one of the first two (the rings in turn)", at, len(batches))
	}
}

// TestBindFanout: sockets bound to two EtherTypes share a fanout group
// per EtherType, each frame reaching one of them.
func TestBindFanout(t *testing.T) {
	v := newVeth(t, 1500)
	fo := Fanout{ID: 0x4a12, Mode: FanoutHash}
	bind := []Binding{{EtherType: unix.ETH_P_IP}, {EtherType: testEtherType}}
	s1 := v.open(t, vethB, Config{Fanout: &fo, Bind: bind})
	s2 := v.open(t, vethB, Config{Bind: bind})
	if err := s2.SetFanout(fo); err != nil {
		t.Fatalf("SetFanout: %v", err)
	}
	peer := v.plain(t, vethA)
	const ip4, test = 200, 20
	for i := range ip4 {
		peer.send(t, udpFrame(uint16(i%16), uint32(i)))
	}
	for i := range test {
		peer.send(t, testFrame(macB, macA, 1, uint32(i), 80))
	}
	var c1, c2 map[uint16]int
	var err1, err2 error
	var wg sync.WaitGroup
	wg.Go(func() { c1, _, err1 = byType(s1, ip4+test, 400*time.Millisecond) })
	wg.Go(func() { c2, _, err2 = byType(s2, ip4+test, 400*time.Millisecond) })
	wg.Wait()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []uint16{unix.ETH_P_IP, testEtherType} {
		want := map[uint16]int{unix.ETH_P_IP: ip4, testEtherType: test}[typ]
		if got := c1[typ] + c2[typ]; got != want {
			t.Errorf("EtherType %#04x: %d + %d frames, want %d in total (each once)", typ, c1[typ], c2[typ], want)
		}
	}
	if c1[unix.ETH_P_IP] == 0 || c2[unix.ETH_P_IP] == 0 {
		t.Errorf("IPv4 frames per socket %d and %d: the group did not spread 16 flows", c1[unix.ETH_P_IP], c2[unix.ETH_P_IP])
	}
}

func TestBindConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"ETH_P_ALL", Config{Bind: []Binding{{EtherType: unix.ETH_P_ALL}}}},
		{"zero", Config{Bind: []Binding{{EtherType: 0}}}},
		{"twice", Config{Bind: []Binding{{EtherType: unix.ETH_P_IP}, {EtherType: unix.ETH_P_IP}}}},
		{"negative frames", Config{Bind: []Binding{{EtherType: unix.ETH_P_IP, Frames: -1}}}},
		{"too many", Config{Bind: []Binding{{EtherType: 0x1001}, {EtherType: 0x1002}, {EtherType: 0x1003}, {EtherType: 0x1004}, {EtherType: 0x1005}}}},
		{"no RX", Config{NoRX: true, Bind: []Binding{{EtherType: unix.ETH_P_IP}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.cfg.Geometry(1500); !errors.Is(err, ErrConfig) {
				t.Errorf("Geometry: %v, want ErrConfig", err)
			}
		})
	}
	ok := Config{Bind: []Binding{{EtherType: 0x1001}, {EtherType: 0x1002}, {EtherType: 0x1003}, {EtherType: 0x1004}}}
	if _, err := ok.Geometry(1500); err != nil {
		t.Errorf("Geometry with %d bindings: %v", MaxBindings, err)
	}
}

func TestBindingFanout(t *testing.T) {
	f := &Fanout{ID: 0x0102, Mode: FanoutHash}
	if got := bindingFanout(f, 0); got != f {
		t.Errorf("binding 0: %+v, want the socket's own group", got)
	}
	if got := bindingFanout(nil, 2); got != nil {
		t.Errorf("no group: %+v, want nil", got)
	}
	ids := map[uint16]bool{}
	for k := range MaxBindings {
		g := bindingFanout(f, k)
		if g.Mode != f.Mode || ids[g.ID] {
			t.Errorf("binding %d: %+v (IDs so far %v)", k, g, ids)
		}
		ids[g.ID] = true
	}
	if f.ID != 0x0102 {
		t.Errorf("bindingFanout changed the caller's group: %+v", f)
	}
}
