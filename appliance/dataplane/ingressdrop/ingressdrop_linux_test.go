package ingressdrop

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

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

func requireRoot(t *testing.T) {
	t.Helper()
	testenv.Require(t, "root", "ip", "ping")
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAttach joins namespaces A and B with a veth pair and checks, with a
// packet socket on B's end: before Attach the kernel in B answers A's
// ping; with the drop attached it does not, while the packet socket still
// receives A's frames; after Close the kernel answers again.
func TestAttach(t *testing.T) {
	requireRoot(t)
	a, b := fmt.Sprintf("ind-a-%d", os.Getpid()), fmt.Sprintf("ind-b-%d", os.Getpid())
	for _, ns := range []string{a, b} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		run(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	run(t, "ip", "-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b)
	run(t, "ip", "-n", a, "addr", "add", "10.199.0.1/24", "dev", "va")
	run(t, "ip", "-n", b, "addr", "add", "10.199.0.2/24", "dev", "vb")
	run(t, "ip", "-n", a, "link", "set", "va", "up")
	run(t, "ip", "-n", b, "link", "set", "vb", "up")
	ping := func() error {
		out, err := exec.Command("ip", "netns", "exec", a, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.199.0.2").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	flushARP := func() { run(t, "ip", "-n", a, "neigh", "flush", "dev", "va") }
	if err := ping(); err != nil {
		t.Fatalf("before Attach: ping A→B: %v", err)
	}

	// This goroutine's thread enters B for the socket and the attachment.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	nsB, err := os.Open("/run/netns/" + b)
	if err != nil {
		t.Fatal(err)
	}
	defer nsB.Close()
	if err := unix.Setns(int(nsB.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatalf("setns: %v", err)
	}
	defer unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET)

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
