package ingressdrop

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"

	"golang.org/x/sys/unix"
)

func TestProgramEncoding(t *testing.T) {
	// r0 = 2 (BPF_ALU64|BPF_MOV|BPF_K, imm 2); exit: as libbpf and
	// bpftool -d print them.
	for i, want := range []uint64{0x00000002000000b7, 0x0000000000000095} {
		if program[i] != want {
			t.Errorf("insn %d = %#016x, want %#016x", i, program[i], want)
		}
	}
}

func TestRetrySignals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		errs  []error // what the calls return, in order; then success
		calls int
		err   error
	}{
		{"success at once", nil, 1, nil},
		{"EAGAIN from a pending signal, then success", []error{unix.EAGAIN, unix.EAGAIN}, 3, nil},
		{"EINTR, then success", []error{unix.EINTR}, 2, nil},
		{"other errors are not retried", []error{unix.EPERM}, 1, unix.EPERM},
		{"bounded", make([]error, maxSignalRetries+5), maxSignalRetries + 1, unix.EAGAIN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, err := range tc.errs {
				if err == nil {
					tc.errs[i] = unix.EAGAIN
				}
			}
			calls := 0
			fd, err := retrySignals(func() (int, error) {
				calls++
				if calls <= len(tc.errs) {
					return -1, tc.errs[calls-1]
				}
				return 7, nil
			})
			if calls != tc.calls || err != tc.err || (err == nil && fd != 7) {
				t.Errorf("calls %d, fd %d, err %v; want %d calls, err %v", calls, fd, err, tc.calls, tc.err)
			}
		})
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.Require(t, "root", "ip", "ping")
}

// pair makes namespaces A and B, IPv6 off, joined by a veth pair: va
// (10.199.0.1/24) in A, vb (10.199.0.2/24) in B.
func pair(t *testing.T) (a, b *netnstest.Namespace) {
	t.Helper()
	requireRoot(t)
	a, b = netnstest.New(t, "ind-a"), netnstest.New(t, "ind-b")
	for _, ns := range []*netnstest.Namespace{a, b} {
		ns.Sysctl(t, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	netnstest.Veth(t,
		netnstest.End{NS: a, Name: "va", Addrs: []string{"10.199.0.1/24"}, Up: true},
		netnstest.End{NS: b, Name: "vb", Addrs: []string{"10.199.0.2/24"}, Up: true})
	return a, b
}

// TestAttach joins namespaces A and B with a veth pair and checks, with a
// packet socket on B's end: before Attach the kernel in B answers A's
// ping; with the drop attached it does not, while the packet socket still
// receives A's frames; after Close the kernel answers again.
func TestAttach(t *testing.T) {
	a, b := pair(t)
	ping := func() error {
		out, err := a.Output("ping", "-c", "3", "-i", "0.2", "-W", "2", "10.199.0.2")
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(out))
		}
		return nil
	}
	flushARP := func() { a.IP(t, "neigh", "flush", "dev", "va") }
	if err := ping(); err != nil {
		t.Fatalf("before Attach: ping A→B: %v", err)
	}

	// This goroutine's thread enters B for the socket and the attachment.
	b.Do(t, func() { attachInB(t, ping, flushARP) })
}

// attachInB is the rest of TestAttach, run in namespace B.
func attachInB(t *testing.T, ping func() error, flushARP func()) {
	sock, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	d, err := Attach("vb")
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if err := unix.Bind(sock, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex(t, "vb")}); err != nil {
		t.Fatal(err)
	}
	flushARP()
	if err := ping(); err == nil {
		t.Errorf("with the drop attached, the kernel in B still answered A's ping")
	}
	if n := drain(sock); n == 0 {
		t.Errorf("with the drop attached, the packet socket on vb received no frame from A")
	} else {
		t.Logf("packet socket received %d frames while the kernel got none", n)
	}
	if _, err := Attach("nonexistent0"); err == nil {
		t.Errorf("Attach(nonexistent0) succeeded")
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	flushARP()
	if err := ping(); err != nil {
		t.Errorf("after Close: ping A→B: %v (the kernel should see vb's frames again)", err)
	}
}

func ifindex(t *testing.T, name string) int {
	t.Helper()
	ifi, err := net.InterfaceByName(name) // in this thread's namespace
	if err != nil {
		t.Fatal(err)
	}
	return ifi.Index
}

// drain counts the frames queued on a packet socket without blocking long.
func drain(fd int) int {
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 2048)
	n := 0
	for {
		if _, _, err := unix.Recvfrom(fd, buf, 0); err != nil {
			return n
		}
		n++
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func TestDemoteEncoding(t *testing.T) {
	// As bpftool -d prints them: the load of __sk_buff.vlan_present, the
	// jump over four instructions to the drop, the helper call.
	for i, want := range []uint64{
		0x0000000000141261, // r2 = *(u32 *)(r1 + 20)
		0x0000000000040255, // if r2 != 0x0 goto pc+4
		0x00000003000002b7, // r2 = 3
		0x0000002000000085, // call bpf_skb_change_type#32
		0x00000000000000b7, // r0 = 0
		0x0000000000000095, // exit
		0x00000002000000b7, // r0 = 2
		0x0000000000000095, // exit
	} {
		if demote[i] != want {
			t.Errorf("insn %d = %#016x, want %#016x", i, demote[i], want)
		}
	}
}

// TestAttachDemote: with the demote attached to B's end, a socket bound to
// IPv4 there (not a tap: it sees frames after tcx) receives A's untagged
// IPv4 frames marked PACKET_OTHERHOST, while the kernel in B answers none
// of them and A's VLAN-tagged frames reach neither; with the plain drop
// the bound socket receives nothing, which is why the demote exists.
func TestAttachDemote(t *testing.T) {
	a, b := pair(t)
	var vbMAC net.HardwareAddr
	b.Do(t, func() {
		ifi, err := net.InterfaceByName("vb")
		if err != nil {
			t.Fatal(err)
		}
		vbMAC = ifi.HardwareAddr
	})
	// A static neighbour: B's kernel answers no ARP while demoted.
	a.IP(t, "neigh", "replace", "10.199.0.2", "lladdr", vbMAC.String(), "dev", "va", "nud", "permanent")
	ping := func() error {
		out, err := a.Output("ping", "-c", "3", "-i", "0.2", "-W", "1", "10.199.0.2")
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(out))
		}
		return nil
	}
	// sendTagged sends n IPv4 frames to 10.199.5.2 in VLAN 5 from A.
	sendTagged := func(n int) {
		a.Do(t, func() {
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			f := make([]byte, 64)
			copy(f, vbMAC)
			copy(f[6:], []byte{2, 0, 0, 0, 0, 0xa})
			copy(f[12:], []byte{0x81, 0x00, 0x00, 0x05, 0x08, 0x00})
			ip := f[18:]
			ip[0], ip[8], ip[9] = 0x45, 64, 17
			ip[2], ip[3] = 0, 46
			copy(ip[12:], []byte{10, 199, 5, 1, 10, 199, 5, 2})
			for range n {
				if err := unix.Sendto(fd, f, 0, &unix.SockaddrLinklayer{Ifindex: ifindex(t, "va")}); err != nil {
					t.Errorf("sending a tagged frame: %v", err)
				}
			}
		})
	}
	b.Do(t, func() {
		sock, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(sock)
		if err := unix.Bind(sock, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifindex(t, "vb")}); err != nil {
			t.Fatal(err)
		}
		d, err := AttachDemote("vb")
		if err != nil {
			t.Fatalf("AttachDemote: %v", err)
		}
		if !d.Demote {
			t.Errorf("AttachDemote's Drop has Demote false")
		}
		if err := ping(); err == nil {
			t.Errorf("with the demote attached, the kernel in B still answered A's ping")
		}
		sendTagged(5)
		untagged, tagged, notOther := drainTypes(sock)
		if untagged == 0 || notOther != 0 {
			t.Errorf("the IPv4-bound socket got %d untagged frames, %d of them not PACKET_OTHERHOST; want some, none", untagged, notOther)
		}
		if tagged != 0 {
			t.Errorf("the IPv4-bound socket got %d of the VLAN-tagged frames; want none", tagged)
		}
		d.Close()

		drop, err := Attach("vb")
		if err != nil {
			t.Fatalf("Attach: %v", err)
		}
		ping()
		if u, tg, _ := drainTypes(sock); u+tg != 0 {
			t.Errorf("with the plain drop, the IPv4-bound socket got %d frames; want none (it sees frames after tcx)", u+tg)
		}
		drop.Close()
		if err := ping(); err != nil {
			t.Errorf("after Close: ping A→B: %v", err)
		}
	})
}

// drainTypes counts the IPv4 frames queued on a packet socket by where
// they were going (10.199.0.2 untagged, 10.199.5.2 tagged) and how many
// of the untagged ones were not PACKET_OTHERHOST.
func drainTypes(fd int) (untagged, tagged, notOther int) {
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 2048)
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return
		}
		if n < 20 {
			continue
		}
		// The kernel cleared the tag of a tagged frame before it got
		// here: every IPv4 header starts at 14.
		switch dst := net.IP(buf[30:34]).String(); dst {
		case "10.199.0.2":
			untagged++
			if ll, ok := from.(*unix.SockaddrLinklayer); !ok || ll.Pkttype != unix.PACKET_OTHERHOST {
				notOther++
			}
		case "10.199.5.2":
			tagged++
		}
	}
}
