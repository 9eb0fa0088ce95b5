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

// TestAttach joins namespaces A and B with a veth pair and checks, with a
// packet socket on B's end: before Attach the kernel in B answers A's
// ping; with the drop attached it does not, while the packet socket still
// receives A's frames; after Close the kernel answers again.
func TestAttach(t *testing.T) {
	requireRoot(t)
	a, b := netnstest.New(t, "ind-a"), netnstest.New(t, "ind-b")
	for _, ns := range []*netnstest.Namespace{a, b} {
		ns.Sysctl(t, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	netnstest.Veth(t,
		netnstest.End{NS: a, Name: "va", Addrs: []string{"10.199.0.1/24"}, Up: true},
		netnstest.End{NS: b, Name: "vb", Addrs: []string{"10.199.0.2/24"}, Up: true})
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
