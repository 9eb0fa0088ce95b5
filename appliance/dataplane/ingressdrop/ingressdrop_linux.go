// Package ingressdrop keeps the kernel's network stack off a data port: a tcx ingress BPF program drops every received frame after the packet taps (AF_PACKET) have seen it, or demotes it for rings bound after tcx.
//
// The dataplane reads a data port's frames from its AF_PACKET ring; the
// kernel gets the same frames and, in NAT mode, where they are addressed
// to the port's MAC, runs each through ip_rcv, a route lookup and
// ip_error, allocating and RCU-freeing a dst per frame only to drop it
// (its cost: docs/dataplane.md, Measured). The kernel taps packet
// sockets before the ingress hook (__netif_receive_skb_core), so a tcx
// ingress program that returns TC_ACT_SHOT leaves the rings untouched and
// ends the kernel's share there. The program is two instructions loaded
// with bpf(2) (no C, no object file; the demote below is written with
// cilium/ebpf's asm package) and attached with a BPF link: the
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
	"fmt"
	"net"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Drop is one data port's attachment. Close detaches it.
type Drop struct {
	Iface string
	// Demote is set for AttachDemote's program.
	Demote bool
	link   int
}

// tcActShot is TC_ACT_SHOT: drop the frame.
const tcActShot = 2

// program is "r0 = TC_ACT_SHOT; exit" as struct bpf_insn values.
var program = [2]uint64{
	insn(0xb7, 0, 0, 0, tcActShot), // BPF_ALU64 | BPF_MOV | BPF_K
	insn(0x95, 0, 0, 0, 0),         // BPF_JMP | BPF_EXIT
}

// Offsets in struct __sk_buff and values the demoting program uses.
const (
	tcActOK         = 0  // TC_ACT_OK: on to the protocol handlers
	packetOtherhost = 3  // PACKET_OTHERHOST
	offProtocol     = 16 // offsetof(struct __sk_buff, protocol)
	offVLANPresent  = 20 // offsetof(struct __sk_buff, vlan_present)
)

// demote is AttachDemote's program: untagged IPv4, IPv6 and ARP frames
// are demoted as they are; every other frame gets the marker tag in front
// of its own and is demoted, so every frame on the marker's ring starts
// with it.
// Two pushes put the marker in the frame: the first makes it the skb's
// offloaded tag (moving a tag already offloaded into the frame), the
// second moves it into the frame, sets skb->protocol to its TPID and
// leaves a second marker offloaded, which the kernel clears after tcx (no
// VLAN device can have VLAN 4095). A pop would not do: it moves the
// frame's next tag back out of the frame.
func demote() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, offVLANPresent, asm.Word),
		asm.JNE.Imm(asm.R2, 0, "mark"),
		asm.LoadMem(asm.R2, asm.R6, offProtocol, asm.Word),
		asm.JEq.Imm(asm.R2, int32(htons(unix.ETH_P_IP)), "demote"),
		asm.JEq.Imm(asm.R2, int32(htons(unix.ETH_P_IPV6)), "demote"),
		asm.JEq.Imm(asm.R2, int32(htons(unix.ETH_P_ARP)), "demote"),

		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol("mark"),
		asm.Mov.Imm(asm.R2, int32(htons(MarkerTPID))),
		asm.Mov.Imm(asm.R3, MarkerTCI),
		asm.FnSkbVlanPush.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, int32(htons(MarkerTPID))),
		asm.Mov.Imm(asm.R3, MarkerTCI),
		asm.FnSkbVlanPush.Call(),
		asm.JNE.Imm(asm.R0, 0, "drop"),

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

// insn encodes a struct bpf_insn {u8 code; u8 dst:4, src:4; s16 off; s32 imm}
// in little-endian order (amd64, arm64).
func insn(code, dst, src uint8, off int16, imm int32) uint64 {
	return uint64(code) | uint64(dst&0xf|src<<4)<<8 | uint64(uint16(off))<<16 | uint64(uint32(imm))<<32
}

// progLoadAttr is the BPF_PROG_LOAD part of union bpf_attr, up to
// expected_attach_type.
type progLoadAttr struct {
	progType           uint32
	insnCnt            uint32
	insns              uint64
	license            uint64
	logLevel           uint32
	logSize            uint32
	logBuf             uint64
	kernVersion        uint32
	progFlags          uint32
	progName           [16]byte
	progIfindex        uint32
	expectedAttachType uint32
}

// linkCreateAttr is the BPF_LINK_CREATE part of union bpf_attr for tcx.
type linkCreateAttr struct {
	progFd           uint32
	targetIfindex    uint32
	attachType       uint32
	flags            uint32
	relativeFd       uint32
	_                uint32
	expectedRevision uint64
}

func bpf(cmd int, attr unsafe.Pointer, size uintptr) (int, error) {
	return retrySignals(func() (int, error) {
		r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
		if errno != 0 {
			return -1, errno
		}
		return int(r), nil
	})
}

// maxSignalRetries bounds retrySignals; a verifier that never finishes
// between two of the Go runtime's signals is reported, not spun on.
const maxSignalRetries = 100

// retrySignals repeats call while it fails with EAGAIN or EINTR: the
// verifier gives up with EAGAIN when a signal is pending (Linux 4.20+),
// and the Go runtime signals its threads to preempt goroutines — under
// QEMU TCG even two instructions' verification was interrupted (CI,
// 2026-12-01). cilium/ebpf retries BPF_PROG_LOAD the same way.
func retrySignals(call func() (int, error)) (int, error) {
	for i := 0; ; i++ {
		r, err := call()
		if (err != unix.EAGAIN && err != unix.EINTR) || i == maxSignalRetries {
			return r, err
		}
	}
}

// loadProgram loads the program insns, named name, and returns its
// descriptor.
func loadProgram(insns []uint64, name string) (int, error) {
	license := []byte("GPL\x00")
	attr := progLoadAttr{
		progType:           unix.BPF_PROG_TYPE_SCHED_CLS,
		insnCnt:            uint32(len(insns)),
		insns:              uint64(uintptr(unsafe.Pointer(&insns[0]))),
		license:            uint64(uintptr(unsafe.Pointer(&license[0]))),
		expectedAttachType: unix.BPF_TCX_INGRESS,
	}
	copy(attr.progName[:], name)
	fd, err := bpf(unix.BPF_PROG_LOAD, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	runtime.KeepAlive(license)
	runtime.KeepAlive(insns)
	if err != nil {
		return -1, fmt.Errorf("loading the %s program (bpf BPF_PROG_LOAD): %w", name, err)
	}
	return fd, nil
}

// Attach drops every frame the kernel receives on iface after the packet
// taps, until Close.
func Attach(iface string) (*Drop, error) {
	prog, err := loadProgram(program[:], "e1kbox_drop")
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %s: %w", iface, err)
	}
	defer unix.Close(prog) // the link holds its own reference
	return attach(iface, prog, false)
}

// AttachDemote demotes every frame the kernel receives on iface to
// PACKET_OTHERHOST after tcx ingress, marking those that are neither
// untagged IPv4, IPv6 nor ARP for the ring bound to MarkerTPID (package
// doc), until Close: for a port whose rings are bound to EtherTypes.
func AttachDemote(iface string) (*Drop, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "e1kbox_demote", Type: ebpf.SchedCLS,
		AttachType: ebpf.AttachTCXIngress, Instructions: demote(), License: "GPL"})
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %s: loading the demote program: %w", iface, err)
	}
	defer prog.Close() // the link holds its own reference
	return attach(iface, prog.FD(), true)
}

func attach(iface string, prog int, isDemote bool) (*Drop, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %w", err)
	}
	attr := linkCreateAttr{progFd: uint32(prog), targetIfindex: uint32(ifi.Index), attachType: unix.BPF_TCX_INGRESS}
	link, err := bpf(unix.BPF_LINK_CREATE, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %s: attaching to tcx ingress (bpf BPF_LINK_CREATE): %w", iface, err)
	}
	return &Drop{Iface: iface, Demote: isDemote, link: link}, nil
}

// Close detaches the program: the kernel sees iface's frames again.
func (d *Drop) Close() error {
	if d == nil || d.link < 0 {
		return nil
	}
	err := unix.Close(d.link)
	d.link = -1
	if err != nil {
		return fmt.Errorf("ingressdrop: %s: %w", d.Iface, err)
	}
	return nil
}
