// Package ingressdrop keeps the kernel's network stack off a data port: a tcx ingress BPF program drops every received frame after the packet taps (AF_PACKET) have seen it, or demotes it for rings bound after tcx.
//
// The dataplane reads a data port's frames from its AF_PACKET ring; the
// kernel gets the same frames and, in NAT mode, where they are addressed
// to the port's MAC, runs each through ip_rcv, a route lookup and
// ip_error, allocating and RCU-freeing a dst per frame only to drop it
// (its cost: docs/dataplane.md, Measured). The kernel taps packet
// sockets before the ingress hook (__netif_receive_skb_core), so a tcx
// ingress program that returns TC_ACT_SHOT leaves the rings untouched and
// ends the kernel's share there. It lets one kind of frame through, the
// WAN clients' DHCP replies, demoted as below: the clients' sockets are
// bound to IPv4 and IPv6 (package wantap), so they see frames after tcx
// under either program and no tap sits in front of a data port's fast
// path; on a WAN of a VLAN, its tagged replies, untagged and marked for
// the clients' socket filters (ReplyMark). The programs are written with cilium/ebpf's asm package (no C,
// no object file) and attached with a BPF link: the
// link holds the attachment only while its file descriptor is open, so a
// crashed or killed appliance gives the kernel its frames back.
//
// Rings bound to EtherTypes (afpacket.Config.Bind) are not taps: the
// kernel hands them frames after tcx ingress, where a drop would starve
// them too. For such a port AttachDemote marks each frame
// PACKET_OTHERHOST (bpf_skb_change_type) instead: the kernel's IPv4, IPv6
// and ARP handlers drop such frames first thing, while packet sockets
// take them. Every other frame — another EtherType, or VLAN-tagged, whose
// tag the kernel would clear before the bound rings see it — it marks
// for the ring bound to MarkerTPID: it pushes a marker tag (MarkerTCI)
// in front of the frame's own tags and EtherType, so that the kernel
// hands the frame, with its tags in place, to that ring; Unmark gives the
// frame back as it came in.
//
// It needs CONFIG_BPF_SYSCALL and tcx (CONFIG_NET_XGRESS, Linux 6.6+);
// gokrazy's kernel and the build host's have both.
package ingressdrop

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Drop is one data port's attachment. Close detaches it.
type Drop struct {
	Iface string
	// Demote is set for AttachDemote's program.
	Demote bool
	// WANVLAN is the VLAN whose tagged replies the programs hand to the
	// WAN clients (0: their untagged ones), as attached.
	WANVLAN uint16
	link    link.Link
}

// Offsets in struct __sk_buff and values the programs use.
const (
	tcActOK         = 0  // TC_ACT_OK: on to the protocol handlers
	tcActShot       = 2  // TC_ACT_SHOT: drop the frame
	packetOtherhost = 3  // PACKET_OTHERHOST
	offMark         = 8  // offsetof(struct __sk_buff, mark)
	offProtocol     = 16 // offsetof(struct __sk_buff, protocol)
	offVLANPresent  = 20 // offsetof(struct __sk_buff, vlan_present)
	offVLANTCI      = 24 // offsetof(struct __sk_buff, vlan_tci)
	offVLANProto    = 28 // offsetof(struct __sk_buff, vlan_proto)
	offData         = 76 // offsetof(struct __sk_buff, data)
	offDataEnd      = 80 // offsetof(struct __sk_buff, data_end)
)

// The headers drop reads, and the WAN clients' ports it lets through.
const (
	ethLen  = 14
	ipv4Len = 20 // without options
	ipv6Len = 40
	udpLen  = 8
	// dhcpv4ClientPort and dhcpv6ClientPort are the UDP ports the WAN
	// clients (wanclient, dhcp6c) receive their servers' replies on
	// (their own clientPort; their TestNetnsIngressDrop checks the two agree).
	dhcpv4ClientPort = 68
	dhcpv6ClientPort = 546
)

// drop is Attach's program: it drops every frame but the WAN clients'
// replies (reply), which it demotes as AttachDemote does, so that the
// clients' sockets, bound to IPv4 and IPv6 (package wantap), get them
// after tcx under either program. The kernel's stack drops them first
// thing. On a WAN of VLAN vid (not 0) the replies are the tagged ones of
// that VLAN, untagged and marked (ReplyMark); untagged ones are dropped.
func drop(vid uint16) asm.Instructions {
	if vid == 0 {
		return slices.Concat(untagged("drop"), reply("demote", "drop"), exits())
	}
	return slices.Concat(asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, offVLANPresent, asm.Word),
		asm.JEq.Imm(asm.R2, 0, "drop"),
	}, ownVLAN(vid, "drop"), reply("wan", "drop"), exits(), unwrap(vid))
}

// reply jumps to yes for a WAN client's reply in the skb in R6 —
// IPv4/UDP to port 68 that is not a later fragment (after the header's
// options) or IPv6/UDP to port 546 (no extension headers) — and to no
// for any other frame. It reads the frame's headers after its offloaded
// tag, if any (the kernel takes an 802.1Q tag out of the frame before
// tcx, __netif_receive_skb_core), and leaves the skb in R6.
func reply(yes, no string) asm.Instructions {
	ipv4 := fits(asm.R2, ethLen+ipv4Len, no)
	ipv4[0] = ipv4[0].WithSymbol("ipv4")
	return slices.Concat(asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, offData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, offDataEnd, asm.Word),
		asm.LoadMem(asm.R4, asm.R6, offProtocol, asm.Word),
		asm.JEq.Imm(asm.R4, int32(htons(unix.ETH_P_IP)), "ipv4"),
		asm.JNE.Imm(asm.R4, int32(htons(unix.ETH_P_IPV6)), no),
	}, fits(asm.R2, ethLen+ipv6Len+udpLen, no), asm.Instructions{
		asm.LoadMem(asm.R4, asm.R2, ethLen+6, asm.Byte), // next header
		asm.JNE.Imm(asm.R4, unix.IPPROTO_UDP, no),
		asm.LoadMem(asm.R4, asm.R2, ethLen+ipv6Len+2, asm.Half),
		asm.JEq.Imm(asm.R4, int32(htons(dhcpv6ClientPort)), yes),
		asm.Ja.Label(no),
	}, ipv4, asm.Instructions{
		asm.LoadMem(asm.R4, asm.R2, ethLen+9, asm.Byte), // protocol
		asm.JNE.Imm(asm.R4, unix.IPPROTO_UDP, no),
		asm.LoadMem(asm.R4, asm.R2, ethLen+6, asm.Half), // flags, fragment offset
		asm.And.Imm(asm.R4, int32(htons(0x1fff))),
		asm.JNE.Imm(asm.R4, 0, no),
		asm.LoadMem(asm.R4, asm.R2, ethLen, asm.Byte), // version, IHL
		asm.And.Imm(asm.R4, 0x0f),
		asm.LSh.Imm(asm.R4, 2),
		asm.Add.Reg(asm.R2, asm.R4), // the UDP header is ethLen past this
	}, fits(asm.R2, ethLen+udpLen, no), asm.Instructions{
		asm.LoadMem(asm.R4, asm.R2, ethLen+2, asm.Half),
		asm.JEq.Imm(asm.R4, int32(htons(dhcpv4ClientPort)), yes),
		asm.Ja.Label(no),
	})
}

// ownVLAN jumps to other unless the tag offloaded in the skb in R6 (one
// is) is an 802.1Q tag of VLAN vid, whatever its priority.
func ownVLAN(vid uint16, other string) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, offVLANProto, asm.Word),
		asm.JNE.Imm(asm.R2, int32(htons(unix.ETH_P_8021Q)), other),
		asm.LoadMem(asm.R2, asm.R6, offVLANTCI, asm.Word),
		asm.And.Imm(asm.R2, 0x0fff),
		asm.JNE.Imm(asm.R2, int32(vid), other),
	}
}

// unwrap, at "wan", takes the offloaded tag off the skb in R6 (a client's
// reply of VLAN vid; bpf_skb_vlan_pop), marks it ReplyMark(vid) and
// demotes it; it drops the frame when the pop fails.
func unwrap(vid uint16) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("wan"),
		asm.FnSkbVlanPop.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),
		asm.Mov.Imm32(asm.R2, int32(ReplyMark(vid))),
		asm.StoreMem(asm.R6, offMark, asm.R2, asm.Word),
		asm.Ja.Label("demote"),
	}
}

// demote is AttachDemote's program: untagged IPv4, IPv6 and ARP frames
// are demoted as they are; every other frame gets the marker tag in front
// of its own and is demoted, so every frame on the marker's ring starts
// with it — but on a WAN of VLAN vid (not 0) a client's reply of that
// VLAN, which is untagged, marked (ReplyMark) and demoted for the
// clients' sockets, as drop does.
// Two pushes put the marker in the frame: the first makes it the skb's
// offloaded tag (moving a tag already offloaded into the frame), the
// second moves it into the frame, sets skb->protocol to its TPID and
// leaves a second marker offloaded, which the kernel clears after tcx (no
// VLAN device can have VLAN 4095). A pop would not do: it moves the
// frame's next tag back out of the frame.
func demote(vid uint16) asm.Instructions {
	mark := pushMarker()
	mark[0] = mark[0].WithSymbol("mark")
	tagged, wan := "mark", asm.Instructions(nil)
	if vid != 0 {
		tagged = "tagged"
		own := ownVLAN(vid, "mark")
		own[0] = own[0].WithSymbol("tagged")
		wan = slices.Concat(own, reply("wan", "mark"), unwrap(vid))
	}
	return slices.Concat(untagged(tagged), asm.Instructions{
		asm.LoadMem(asm.R2, asm.R6, offProtocol, asm.Word),
		asm.JEq.Imm(asm.R2, int32(htons(unix.ETH_P_IP)), "demote"),
		asm.JEq.Imm(asm.R2, int32(htons(unix.ETH_P_IPV6)), "demote"),
		asm.JEq.Imm(asm.R2, int32(htons(unix.ETH_P_ARP)), "demote"),
	}, mark, pushMarker(), exits(), wan)
}

// untagged starts both programs: it keeps the skb in R6 and jumps to
// tagged with a frame whose VLAN tag the NIC or kernel took out.
func untagged(tagged string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, offVLANPresent, asm.Word),
		asm.JNE.Imm(asm.R2, 0, tagged),
	}
}

// fits jumps to no unless n bytes from the address in reg lie before the
// frame's end (R3).
func fits(reg asm.Register, n int32, no string) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R4, reg),
		asm.Add.Imm(asm.R4, n),
		asm.JGT.Reg(asm.R4, asm.R3, no),
	}
}

// pushMarker pushes the marker tag onto the skb in R6
// (bpf_skb_vlan_push), dropping the frame when that fails.
func pushMarker() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, int32(htons(MarkerTPID))),
		asm.Mov.Imm(asm.R3, MarkerTCI),
		asm.FnSkbVlanPush.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),
	}
}

// exits are both programs' ends, jumped to with the skb in R6: "demote"
// marks the frame PACKET_OTHERHOST and hands it on, "drop" drops it.
func exits() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("demote"),
		asm.Mov.Imm(asm.R2, packetOtherhost),
		asm.FnSkbChangeType.Call(),
		asm.Mov.Imm(asm.R0, tcActOK),
		asm.Return(),

		asm.Mov.Imm(asm.R0, tcActShot).WithSymbol("drop"),
		asm.Return(),
	}
}

// htons is v in network byte order, as a little-endian load of it reads
// (amd64, arm64).
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Attach drops every frame the kernel receives on iface after the packet
// taps but the WAN clients' replies, which it demotes (drop), until
// Close. wanVLAN is the WAN's VLAN on a NAT WAN port of one (its clients
// get the replies of that VLAN, untagged and marked, and no untagged
// ones), else 0.
func Attach(iface string, wanVLAN uint16) (*Drop, error) {
	return attach(iface, "e1kbox_drop", drop(wanVLAN), false, wanVLAN)
}

// AttachDemote demotes every frame the kernel receives on iface to
// PACKET_OTHERHOST after tcx ingress, marking those that are neither
// untagged IPv4, IPv6 nor ARP for the ring bound to MarkerTPID (package
// doc), until Close: for a port whose rings are bound to EtherTypes.
// wanVLAN is as in Attach: the WAN clients' replies of that VLAN are not
// marked but untagged for them.
func AttachDemote(iface string, wanVLAN uint16) (*Drop, error) {
	return attach(iface, "e1kbox_demote", demote(wanVLAN), true, wanVLAN)
}

// attach loads insns as a tcx ingress program named name and links it
// to iface, after the programs already there (the fast path anchors
// itself at the head).
func attach(iface, name string, insns asm.Instructions, isDemote bool, wanVLAN uint16) (*Drop, error) {
	if wanVLAN > 4094 {
		return nil, fmt.Errorf("ingressdrop: %s: WAN VLAN %d out of range 1..4094", iface, wanVLAN)
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %w", err)
	}
	prog, err := load(iface, name, insns)
	if err != nil {
		return nil, err
	}
	defer prog.Close() // the link holds its own reference
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %s: attaching to tcx ingress: %w", iface, err)
	}
	return &Drop{Iface: iface, Demote: isDemote, WANVLAN: wanVLAN, link: l}, nil
}

// load loads insns as a tcx ingress program named name. ebpf.NewProgram
// repeats the load while the verifier is interrupted by a signal
// (EAGAIN), which the Go runtime's preemption signals caused under QEMU
// TCG even for two instructions.
func load(iface, name string, insns asm.Instructions) (*ebpf.Program, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.SchedCLS,
		AttachType: ebpf.AttachTCXIngress, Instructions: insns, License: "GPL"})
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %s: loading the %s program: %w", iface, name, err)
	}
	return prog, nil
}

// SetWANVLAN replaces the attached program by one for the WAN VLAN
// wanVLAN (as Attach or AttachDemote take it), in one step (the link's
// update: no frame sees neither). The caller serializes it with the
// Drop's other uses.
func (d *Drop) SetWANVLAN(wanVLAN uint16) error {
	if d == nil || d.link == nil {
		return errors.New("ingressdrop: SetWANVLAN on a closed Drop")
	}
	if wanVLAN > 4094 {
		return fmt.Errorf("ingressdrop: %s: WAN VLAN %d out of range 1..4094", d.Iface, wanVLAN)
	}
	name, insns := "e1kbox_drop", drop(wanVLAN)
	if d.Demote {
		name, insns = "e1kbox_demote", demote(wanVLAN)
	}
	prog, err := load(d.Iface, name, insns)
	if err != nil {
		return err
	}
	defer prog.Close()
	if err := d.link.Update(prog); err != nil {
		return fmt.Errorf("ingressdrop: %s: replacing the %s program: %w", d.Iface, name, err)
	}
	d.WANVLAN = wanVLAN
	return nil
}

// Close detaches the program: the kernel sees iface's frames again.
func (d *Drop) Close() error {
	if d == nil || d.link == nil {
		return nil
	}
	err := d.link.Close()
	d.link = nil
	if err != nil {
		return fmt.Errorf("ingressdrop: %s: %w", d.Iface, err)
	}
	return nil
}
