package vlanpeer

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Peer is a veth end's attachment: frames the namespace sends through it
// leave tagged with VID and PCP; of those it receives, only frames tagged
// VID reach the namespace, untagged. Close detaches it.
type Peer struct {
	Iface string
	VID   uint16
	PCP   uint8

	counts  *ebpf.Map
	ingress link.Link
	egress  link.Link
}

// Key is what the ingress program saw of a frame (before it popped the
// tag or dropped the frame).
type Key struct {
	Tagged    uint8  // 1 if the frame arrived tagged
	PCP       uint8  // its tag's priority
	VID       uint16 // its tag's VLAN
	EtherType uint16 // the EtherType inside the tag
	Proto     uint8  // IPv4's protocol or IPv6's next header, 0 for other EtherTypes
	_         uint8
	Port      uint16 // the UDP destination port, or the ICMP/ICMPv6 type
	_         uint16
}

// Count is one Key and how many frames had it.
type Count struct {
	Key
	Frames uint64
}

// Offsets in struct __sk_buff and values the programs use.
const (
	tcActOK        = 0
	tcActShot      = 2
	offProtocol    = 16 // offsetof(struct __sk_buff, protocol)
	offVLANPresent = 20 // offsetof(struct __sk_buff, vlan_present)
	offVLANTCI     = 24 // offsetof(struct __sk_buff, vlan_tci)
	offData        = 76 // offsetof(struct __sk_buff, data)
	offDataEnd     = 80 // offsetof(struct __sk_buff, data_end)
	ethLen         = 14
	ipv4Len        = 20
	ipv6Len        = 40
	// The key's fields on the stack, from key (R10+key).
	key          = -16
	keyTagged    = key
	keyPCP       = key + 1
	keyVID       = key + 2
	keyEtherType = key + 4
	keyProto     = key + 6
	keyPort      = key + 8
	one          = -24 // a uint64 1, the value a new key starts with
)

// Attach attaches the pair to iface in the calling thread's namespace
// (wrap it in netnstest's Namespace.Do). vid is 1..4094, pcp 0..7.
func Attach(iface string, vid uint16, pcp uint8) (*Peer, error) {
	if vid < 1 || vid > 4094 || pcp > 7 {
		return nil, fmt.Errorf("vlanpeer: VLAN %d priority %d out of range", vid, pcp)
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("vlanpeer: %w", err)
	}
	p := &Peer{Iface: iface, VID: vid, PCP: pcp}
	p.counts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "vlanpeer_seen", Type: ebpf.Hash,
		KeySize: 12, ValueSize: 8, MaxEntries: 1024})
	if err != nil {
		return nil, fmt.Errorf("vlanpeer: %s: counts map: %w", iface, err)
	}
	if p.ingress, err = attach(ifi.Index, "vlanpeer_in", ebpf.AttachTCXIngress, ingress(p.counts.FD(), vid)); err != nil {
		p.Close()
		return nil, fmt.Errorf("vlanpeer: %s: %w", iface, err)
	}
	if p.egress, err = attach(ifi.Index, "vlanpeer_out", ebpf.AttachTCXEgress, egress(vid, pcp)); err != nil {
		p.Close()
		return nil, fmt.Errorf("vlanpeer: %s: %w", iface, err)
	}
	return p, nil
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

// egress pushes the tag (bpf_skb_vlan_push), dropping the frame if that
// fails.
func egress(vid uint16, pcp uint8) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R2, int32(htons(unix.ETH_P_8021Q))),
		asm.Mov.Imm(asm.R3, int32(vid)|int32(pcp)<<13),
		asm.FnSkbVlanPush.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),
		asm.Mov.Imm(asm.R0, tcActOK),
		asm.Return(),
		asm.Mov.Imm(asm.R0, tcActShot).WithSymbol("drop"),
		asm.Return(),
	}
}

// ingress counts the frame under its Key, then passes it, its tag popped,
// if it is tagged vid, and drops it otherwise. The kernel takes a frame's
// outer tag out of it before tcx (skb_vlan_untag), so the tag is the skb's.
func ingress(counts int, vid uint16) asm.Instructions {
	ipv6 := fits(ethLen+ipv6Len+4, "count")
	ipv6[0] = ipv6[0].WithSymbol("ipv6")
	count := asm.Instructions{
		asm.LoadMapPtr(asm.R1, counts).WithSymbol("count"),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "new"),
		asm.Mov.Imm(asm.R1, 1),
		asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
		asm.Ja.Label("decide"),
		asm.LoadMapPtr(asm.R1, counts).WithSymbol("new"),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, key),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, one),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),

		asm.LoadMem(asm.R2, asm.R6, offVLANPresent, asm.Word).WithSymbol("decide"),
		asm.JEq.Imm(asm.R2, 0, "drop"),
		asm.LoadMem(asm.R2, asm.R6, offVLANTCI, asm.Word),
		asm.And.Imm(asm.R2, 0x0fff),
		asm.JNE.Imm(asm.R2, int32(vid), "drop"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.FnSkbVlanPop.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),
		asm.Mov.Imm(asm.R0, tcActOK),
		asm.Return(),
		asm.Mov.Imm(asm.R0, tcActShot).WithSymbol("drop"),
		asm.Return(),
	}
	return slices.Concat(asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.R10, key, asm.R2, asm.DWord),
		asm.StoreMem(asm.R10, key+8, asm.R2, asm.Word),
		asm.Mov.Imm(asm.R2, 1),
		asm.StoreMem(asm.R10, one, asm.R2, asm.DWord),
		asm.LoadMem(asm.R2, asm.R6, offVLANPresent, asm.Word),
		asm.JEq.Imm(asm.R2, 0, "untagged"),
		asm.StoreImm(asm.R10, keyTagged, 1, asm.Byte),
		asm.LoadMem(asm.R7, asm.R6, offVLANTCI, asm.Word),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.And.Imm(asm.R2, 0x0fff),
		asm.StoreMem(asm.R10, keyVID, asm.R2, asm.Half),
		asm.RSh.Imm(asm.R7, 13),
		asm.And.Imm(asm.R7, 7),
		asm.StoreMem(asm.R10, keyPCP, asm.R7, asm.Byte),

		asm.LoadMem(asm.R7, asm.R6, offProtocol, asm.Word).WithSymbol("untagged"),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.HostTo(asm.BE, asm.R2, asm.Half),
		asm.StoreMem(asm.R10, keyEtherType, asm.R2, asm.Half),
		asm.LoadMem(asm.R2, asm.R6, offData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, offDataEnd, asm.Word),
		asm.JEq.Imm(asm.R7, int32(htons(unix.ETH_P_IPV6)), "ipv6"),
		asm.JNE.Imm(asm.R7, int32(htons(unix.ETH_P_IP)), "count"),
	}, fits(ethLen+ipv4Len, "count"), asm.Instructions{
		asm.LoadMem(asm.R4, asm.R2, ethLen+9, asm.Byte), // protocol
		asm.StoreMem(asm.R10, keyProto, asm.R4, asm.Byte),
		asm.Mov.Reg(asm.R7, asm.R4),
		asm.LoadMem(asm.R4, asm.R2, ethLen, asm.Byte), // version, IHL
		asm.And.Imm(asm.R4, 0x0f),
		asm.LSh.Imm(asm.R4, 2),
		asm.Add.Reg(asm.R2, asm.R4), // the transport header is ethLen past this
	}, fits(ethLen+4, "count"), l4(unix.IPPROTO_ICMP, ethLen), asm.Instructions{
		asm.Ja.Label("count"),
	}, ipv6, asm.Instructions{
		asm.LoadMem(asm.R7, asm.R2, ethLen+6, asm.Byte), // next header
		asm.StoreMem(asm.R10, keyProto, asm.R7, asm.Byte),
	}, l4(unix.IPPROTO_ICMPV6, ethLen+ipv6Len), count)
}

// l4 stores the port (UDP) or type (ICMP protocol icmp) of the transport
// header at off from R2 (checked to fit), whose protocol is in R7.
func l4(icmp int32, off int16) asm.Instructions {
	return asm.Instructions{
		asm.JEq.Imm(asm.R7, icmp, "icmp"+fmt.Sprint(icmp)),
		asm.JNE.Imm(asm.R7, unix.IPPROTO_UDP, "count"),
		asm.LoadMem(asm.R4, asm.R2, off+2, asm.Half),
		asm.HostTo(asm.BE, asm.R4, asm.Half),
		asm.StoreMem(asm.R10, keyPort, asm.R4, asm.Half),
		asm.Ja.Label("count"),
		asm.LoadMem(asm.R4, asm.R2, off, asm.Byte).WithSymbol("icmp" + fmt.Sprint(icmp)),
		asm.StoreMem(asm.R10, keyPort, asm.R4, asm.Half),
	}
}

// fits jumps to label unless n bytes from R2 lie before the frame's end (R3).
func fits(n int32, label string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, n),
		asm.JGT.Reg(asm.R4, asm.R3, label),
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Seen returns what the ingress program counted, ordered by key.
func (p *Peer) Seen() ([]Count, error) {
	var out []Count
	var k Key
	var n uint64
	it := p.counts.Iterate()
	for it.Next(&k, &n) {
		out = append(out, Count{Key: k, Frames: n})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("vlanpeer: %s: reading counts: %w", p.Iface, err)
	}
	slices.SortFunc(out, func(a, b Count) int {
		return cmp.Or(cmp.Compare(a.Tagged, b.Tagged), cmp.Compare(a.VID, b.VID), cmp.Compare(a.PCP, b.PCP),
			cmp.Compare(a.EtherType, b.EtherType), cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Port, b.Port))
	})
	return out, nil
}

// Dropped sums the frames the ingress program dropped: untagged, or
// tagged with another VLAN.
func (p *Peer) Dropped() (uint64, error) {
	seen, err := p.Seen()
	var n uint64
	for _, c := range seen {
		if c.Tagged == 0 || c.VID != p.VID {
			n += c.Frames
		}
	}
	return n, err
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
		return fmt.Errorf("vlanpeer: %s: %w", p.Iface, err)
	}
	return nil
}
