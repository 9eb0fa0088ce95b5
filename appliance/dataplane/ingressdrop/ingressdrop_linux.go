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
// with bpf(2) (no C, no object file) and attached with a BPF link: the
// link holds the attachment only while its file descriptor is open, so a
// crashed or killed appliance gives the kernel its frames back.
//
// Rings bound to EtherTypes (afpacket.Config.Bind) are not taps: the
// kernel hands them frames after tcx ingress, where a drop would starve
// them too. For such a port AttachDemote marks each frame
// PACKET_OTHERHOST (bpf_skb_change_type) instead: the kernel's IPv4, IPv6
// and ARP handlers drop such frames first thing, while packet sockets
// take them. It drops VLAN-tagged frames outright (the kernel would clear
// the tag before the rings see it).
//
// It needs CONFIG_BPF_SYSCALL and tcx (CONFIG_NET_XGRESS, Linux 6.6+);
// gokrazy's kernel and the build host's have both.
package ingressdrop

import (
	"fmt"
	"net"
	"runtime"
	"unsafe"

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

// Constants of the demoting program.
const (
	tcActOK             = 0  // TC_ACT_OK: on to the protocol handlers
	packetOtherhost     = 3  // PACKET_OTHERHOST
	offVLANPresent      = 20 // offsetof(struct __sk_buff, vlan_present)
	funcSkbChangeType   = 32 // BPF_FUNC_skb_change_type
	demoteSkipToDropOff = 4  // from the jump to the drop branch
)

// demote is AttachDemote's program, as struct bpf_insn values:
//
//	r2 = *(u32 *)(r1 + offsetof(struct __sk_buff, vlan_present))
//	if r2 != 0 goto drop
//	r2 = PACKET_OTHERHOST
//	call bpf_skb_change_type   // r1 is still the skb
//	r0 = TC_ACT_OK
//	exit
//	drop: r0 = TC_ACT_SHOT
//	exit
var demote = [8]uint64{
	insn(0x61, 2, 1, offVLANPresent, 0),      // BPF_LDX | BPF_MEM | BPF_W
	insn(0x55, 2, 0, demoteSkipToDropOff, 0), // BPF_JMP | BPF_JNE | BPF_K
	insn(0xb7, 2, 0, 0, packetOtherhost),     // BPF_ALU64 | BPF_MOV | BPF_K
	insn(0x85, 0, 0, 0, funcSkbChangeType),   // BPF_JMP | BPF_CALL
	insn(0xb7, 0, 0, 0, tcActOK),             // BPF_ALU64 | BPF_MOV | BPF_K
	insn(0x95, 0, 0, 0, 0),                   // BPF_JMP | BPF_EXIT
	insn(0xb7, 0, 0, 0, tcActShot),           // drop:
	insn(0x95, 0, 0, 0, 0),                   // BPF_JMP | BPF_EXIT
}

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
	return attach(iface, program[:], "e1kbox_drop", false)
}

// AttachDemote marks every untagged frame the kernel receives on iface
// PACKET_OTHERHOST after tcx ingress, and drops the tagged ones, until
// Close: for a port whose rings are bound to EtherTypes.
func AttachDemote(iface string) (*Drop, error) {
	return attach(iface, demote[:], "e1kbox_demote", true)
}

func attach(iface string, insns []uint64, name string, isDemote bool) (*Drop, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %w", err)
	}
	prog, err := loadProgram(insns, name)
	if err != nil {
		return nil, fmt.Errorf("ingressdrop: %s: %w", iface, err)
	}
	defer unix.Close(prog) // the link holds its own reference
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
