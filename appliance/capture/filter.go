package capture

import (
	"fmt"
	"net/netip"

	"golang.org/x/net/bpf"
)

// Filter selects frames: all of its set fields must match. The zero Filter
// takes every frame.
type Filter struct {
	// Host is a source or destination address (IPv4 or IPv6; for ARP the
	// sender or target protocol address).
	Host netip.Addr
	// Proto is "", "tcp", "udp", "icmp" (ICMPv6 for IPv6) or "arp".
	Proto string
	// Port is a TCP or UDP source or destination port.
	Port uint16
}

// Offsets in an Ethernet frame (no VLAN tag: the kernel hands tags to
// packet sockets apart from the frame).
const (
	offEtherType = 12
	offIP        = 14
)

// label names an instruction of a program being built; jumps name their
// targets by label.
type label int

const (
	next   label = iota // the following instruction
	accept              // keep the frame
	reject              // drop it
	firstFree
)

type insn struct {
	ins    bpf.Instruction
	jt, jf label // for jumps
	mark   label // this instruction's label (0: none)
}

type builder struct {
	p       []insn
	pending label // the label of the next instruction emitted
	labels  label
}

func (b *builder) newLabel() label {
	if b.labels < firstFree {
		b.labels = firstFree
	}
	b.labels++
	return b.labels
}

func (b *builder) here(l label) { b.pending = l }

func (b *builder) add(in insn) {
	in.mark, b.pending = b.pending, 0
	b.p = append(b.p, in)
}

func (b *builder) emit(i bpf.Instruction)  { b.add(insn{ins: i}) }
func (b *builder) ld(off uint32, size int) { b.emit(bpf.LoadAbsolute{Off: off, Size: size}) }
func (b *builder) jeq(v uint32, jt, jf label) {
	b.add(insn{ins: bpf.JumpIf{Cond: bpf.JumpEqual, Val: v}, jt: jt, jf: jf})
}
func (b *builder) jmp(to label) { b.add(insn{ins: bpf.Jump{}, jt: to}) }

// program builds the filter as classic BPF: each frame that matches is
// kept up to snaplen bytes.
func (f Filter) program(snaplen int) ([]bpf.RawInstruction, error) {
	b := &builder{}
	switch {
	case f.Proto == "arp":
		if f.Port != 0 {
			return nil, fmt.Errorf("a port filter does not apply to ARP")
		}
		if f.Host.IsValid() && !f.Host.Is4() {
			return nil, fmt.Errorf("ARP carries IPv4 addresses, not %v", f.Host)
		}
		b.ld(offEtherType, 2)
		b.jeq(0x0806, next, reject)
		if f.Host.IsValid() {
			h := be32(f.Host)
			b.ld(offIP+14, 4) // sender protocol address
			b.jeq(h, accept, next)
			b.ld(offIP+24, 4) // target protocol address
			b.jeq(h, accept, reject)
		} else {
			b.jmp(accept)
		}
	case f == (Filter{}):
		b.jmp(accept)
	default:
		want4 := !f.Host.IsValid() || f.Host.Is4()
		want6 := !f.Host.IsValid() || f.Host.Is6()
		v6 := b.newLabel()
		b.ld(offEtherType, 2)
		if want4 {
			miss := reject
			if want6 {
				miss = v6
			}
			b.jeq(0x0800, next, miss)
			f.ipv4(b)
		}
		if want6 {
			b.here(v6)
			b.ld(offEtherType, 2)
			b.jeq(0x86DD, next, reject)
			f.ipv6(b)
		}
	}
	return assemble(b.p, snaplen)
}

func be32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func protoNumber(proto string, v6 bool) uint32 {
	switch proto {
	case "tcp":
		return 6
	case "udp":
		return 17
	case "icmp":
		if v6 {
			return 58
		}
		return 1
	}
	return 0
}

// l4 checks the protocol (loaded in A) and, with a port filter, the ports
// that ports() loads.
func (f Filter) l4(b *builder, v6 bool, ports func()) {
	portCheck := b.newLabel()
	switch {
	case f.Proto != "":
		b.jeq(protoNumber(f.Proto, v6), next, reject)
	case f.Port != 0: // TCP or UDP
		b.jeq(6, portCheck, next)
		b.jeq(17, next, reject)
	}
	if f.Port == 0 {
		b.jmp(accept)
		return
	}
	b.here(portCheck)
	ports()
}

func (f Filter) ipv4(b *builder) {
	proto := b.newLabel()
	if f.Host.IsValid() {
		h := be32(f.Host)
		b.ld(offIP+12, 4)
		b.jeq(h, proto, next)
		b.ld(offIP+16, 4)
		b.jeq(h, proto, reject)
	}
	b.here(proto)
	b.ld(offIP+9, 1)
	f.l4(b, false, func() {
		// Not a later fragment, then the ports after the IP header.
		b.ld(offIP+6, 2)
		b.add(insn{ins: bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff}, jt: reject, jf: next})
		b.emit(bpf.LoadMemShift{Off: offIP})
		b.emit(bpf.LoadIndirect{Off: offIP, Size: 2})
		b.jeq(uint32(f.Port), accept, next)
		b.emit(bpf.LoadIndirect{Off: offIP + 2, Size: 2})
		b.jeq(uint32(f.Port), accept, reject)
	})
}

// ipv6 matches the fixed header only: a packet with extension headers
// before TCP or UDP does not match a protocol or port filter.
func (f Filter) ipv6(b *builder) {
	proto := b.newLabel()
	if f.Host.IsValid() {
		a := f.Host.As16()
		dst := b.newLabel()
		for i, base := range []uint32{offIP + 8, offIP + 24} {
			miss := dst
			if i == 1 {
				b.here(dst)
				miss = reject
			}
			for w := range uint32(4) {
				v := uint32(a[4*w])<<24 | uint32(a[4*w+1])<<16 | uint32(a[4*w+2])<<8 | uint32(a[4*w+3])
				b.ld(base+4*w, 4)
				if w < 3 {
					b.jeq(v, next, miss)
				} else {
					b.jeq(v, proto, miss)
				}
			}
		}
	}
	b.here(proto)
	b.ld(offIP+6, 1)
	f.l4(b, true, func() {
		b.ld(offIP+40, 2)
		b.jeq(uint32(f.Port), accept, next)
		b.ld(offIP+42, 2)
		b.jeq(uint32(f.Port), accept, reject)
	})
}

// assemble resolves the labels and appends the two returns.
func assemble(p []insn, snaplen int) ([]bpf.RawInstruction, error) {
	p = append(p, insn{ins: bpf.RetConstant{Val: uint32(snaplen)}, mark: accept}, insn{ins: bpf.RetConstant{Val: 0}, mark: reject})
	at := map[label]int{}
	for i, in := range p {
		if in.mark != 0 {
			at[in.mark] = i
		}
	}
	target := func(i int, l label) (uint8, error) {
		if l == next {
			return 0, nil
		}
		to, ok := at[l]
		if !ok {
			return 0, fmt.Errorf("capture filter: label %d has no instruction", l)
		}
		d := to - i - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("capture filter: a jump of %d", d)
		}
		return uint8(d), nil
	}
	out := make([]bpf.Instruction, len(p))
	for i, in := range p {
		var err error
		switch j := in.ins.(type) {
		case bpf.JumpIf:
			if j.SkipTrue, err = target(i, in.jt); err == nil {
				j.SkipFalse, err = target(i, in.jf)
			}
			out[i] = j
		case bpf.Jump:
			var d uint8
			d, err = target(i, in.jt)
			out[i] = bpf.Jump{Skip: uint32(d)}
		default:
			out[i] = in.ins
		}
		if err != nil {
			return nil, err
		}
	}
	return bpf.Assemble(out)
}
