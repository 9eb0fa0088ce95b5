package pppoepeer

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"e1kbox/internal/netnstest"
)

// Peer is a veth end's attachment: IPv4 and IPv6 frames the namespace
// sends through it leave as PPPoE session frames of Session (their MACs,
// the session header, PPP protocol IPv4 or IPv6, the frame's bytes after
// its EtherType); other frames leave as they are. Its ingress program counts
// what arrives (Counts). Close detaches it.
type Peer struct {
	Iface   string
	Session uint16

	counts  *ebpf.Map
	ingress link.Link
	egress  link.Link
}

// Counts are the frames the ingress program saw: IPv4 in the session,
// any other, and IPv6 in the session.
type Counts struct {
	Session, Other, Session6 uint64
}

// Offsets in struct __sk_buff and values the programs use.
const (
	tcxNext     = -1 // on to the interface's next tcx program (vlanpeer's), if any
	tcActShot   = 2
	offLen      = 0   // offsetof(struct __sk_buff, len)
	offProtocol = 16  // offsetof(struct __sk_buff, protocol)
	hdr         = -32 // the 22 bytes of MACs and session header on the stack
	pppoeLen    = 8
)

// Attach attaches the pair to iface in the calling thread's namespace
// (wrap it in netnstest's Namespace.Do). sid is 1..0xfffe.
func Attach(iface string, sid uint16) (*Peer, error) {
	if sid == 0 || sid == 0xffff {
		return nil, fmt.Errorf("pppoepeer: session %#04x out of range", sid)
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("pppoepeer: %w", err)
	}
	p := &Peer{Iface: iface, Session: sid}
	p.counts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "pppoepeer_seen", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 3})
	if err != nil {
		return nil, fmt.Errorf("pppoepeer: %s: counts map: %w", iface, err)
	}
	if p.ingress, err = attach(ifi.Index, "pppoepeer_in", ebpf.AttachTCXIngress, ingress(p.counts.FD(), sid)); err != nil {
		p.Close()
		return nil, fmt.Errorf("pppoepeer: %s: %w", iface, err)
	}
	if p.egress, err = attach(ifi.Index, "pppoepeer_out", ebpf.AttachTCXEgress, egress(sid)); err != nil {
		p.Close()
		return nil, fmt.Errorf("pppoepeer: %s: %w", iface, err)
	}
	return p, nil
}

// In attaches a Peer to iface in ns for the test, which fails if it
// cannot; the test's cleanup detaches it.
func In(t testing.TB, ns *netnstest.Namespace, iface string, sid uint16) *Peer {
	t.Helper()
	var p *Peer
	ns.Do(t, func() {
		var err error
		if p, err = Attach(iface, sid); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func attach(ifindex int, name string, at ebpf.AttachType, insns asm.Instructions) (link.Link, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SchedCLS,
		AttachType: at, Instructions: insns, License: "GPL"})
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", name, err)
	}
	defer prog.Close()
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: prog, Attach: at})
	if err != nil {
		return nil, fmt.Errorf("attaching %s: %w", name, err)
	}
	return l, nil
}

// egress frames an IPv4 or IPv6 frame in the session: 8 bytes of head
// room (bpf_skb_change_head), the MACs moved there, then the session
// header with the length of the frame's bytes after its EtherType plus
// the PPP protocol, and PPP protocol IPv4 (0x0021) or IPv6 (0x0057) where
// the EtherType was. A frame it cannot frame is dropped.
func egress(sid uint16) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, offProtocol, asm.Word),
		asm.Mov.Imm(asm.R8, 0x21), // the PPP protocol's low byte (R8 survives the calls)
		asm.JEq.Imm(asm.R2, int32(htons(unix.ETH_P_IP)), "frame"),
		asm.Mov.Imm(asm.R8, 0x57),
		asm.JNE.Imm(asm.R2, int32(htons(unix.ETH_P_IPV6)), "pass"),
		asm.LoadMem(asm.R7, asm.R6, offLen, asm.Word).WithSymbol("frame"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, pppoeLen),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnSkbChangeHead.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),
		// The MACs, now 8 bytes in.
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, pppoeLen),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, hdr),
		asm.Mov.Imm(asm.R4, 12),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),
		asm.StoreImm(asm.R10, hdr+12, 0x88, asm.Byte),
		asm.StoreImm(asm.R10, hdr+13, 0x64, asm.Byte),
		asm.StoreImm(asm.R10, hdr+14, 0x11, asm.Byte),
		asm.StoreImm(asm.R10, hdr+15, 0, asm.Byte),
		asm.StoreImm(asm.R10, hdr+16, int64(sid>>8), asm.Byte),
		asm.StoreImm(asm.R10, hdr+17, int64(sid&0xff), asm.Byte),
		asm.Sub.Imm(asm.R7, 14-2), // the length: the bytes after the EtherType, and the PPP protocol
		asm.StoreMem(asm.R10, hdr+19, asm.R7, asm.Byte),
		asm.RSh.Imm(asm.R7, 8),
		asm.StoreMem(asm.R10, hdr+18, asm.R7, asm.Byte),
		asm.StoreImm(asm.R10, hdr+20, 0x00, asm.Byte),
		asm.StoreMem(asm.R10, hdr+21, asm.R8, asm.Byte),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, hdr),
		asm.Mov.Imm(asm.R4, 22),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkbStoreBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),
		asm.Mov.Imm(asm.R0, tcxNext).WithSymbol("pass"),
		asm.Return(),
		asm.Mov.Imm(asm.R0, tcActShot).WithSymbol("drop"),
		asm.Return(),
	}
}

// ingress counts a frame as the session's IPv4 or IPv6 (EtherType PPPoE
// session, version and type 0x11, code 0, the session, PPP protocol IPv4
// or IPv6) or another, and passes it on.
func ingress(counts int, sid uint16) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.StoreImm(asm.R10, -8, 1, asm.Word), // the key: other
		asm.LoadMem(asm.R2, asm.R6, offProtocol, asm.Word),
		asm.JNE.Imm(asm.R2, int32(htons(0x8864)), "count"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 14),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, -24),
		asm.Mov.Imm(asm.R4, 8),
		asm.FnSkbLoadBytes.Call(),
		asm.JNE.Imm(asm.R0, 0, "count"),
		// As a big-endian word pair: 11 00 sid | len 00 21.
		asm.LoadMem(asm.R2, asm.R10, -24, asm.Word),
		asm.JNE.Imm32(asm.R2, int32(uint32(htons(sid))<<16|0x0011), "count"),
		asm.LoadMem(asm.R2, asm.R10, -20, asm.Word),
		asm.RSh.Imm(asm.R2, 16),
		asm.JNE.Imm(asm.R2, int32(htons(0x0021)), "v6"),
		asm.StoreImm(asm.R10, -8, 0, asm.Word), // the session's IPv4
		asm.Ja.Label("count"),
		asm.JNE.Imm(asm.R2, int32(htons(0x0057)), "count").WithSymbol("v6"),
		asm.StoreImm(asm.R10, -8, 2, asm.Word), // the session's IPv6
		asm.LoadMapPtr(asm.R1, counts).WithSymbol("count"),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, tcxNext).WithSymbol("pass"),
		asm.Return(),
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Counts returns what the ingress program counted.
func (p *Peer) Counts() (Counts, error) {
	var c Counts
	for i, v := range []*uint64{&c.Session, &c.Other, &c.Session6} {
		if err := p.counts.Lookup(uint32(i), v); err != nil {
			return c, fmt.Errorf("pppoepeer: %s: reading counts: %w", p.Iface, err)
		}
	}
	return c, nil
}

// Close detaches both programs.
func (p *Peer) Close() error {
	var errs []error
	for _, l := range []link.Link{p.ingress, p.egress} {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	if p.counts != nil {
		errs = append(errs, p.counts.Close())
	}
	p.ingress, p.egress, p.counts = nil, nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pppoepeer: %s: %w", p.Iface, err)
	}
	return nil
}
