//go:build linux

package frame

// The kernel cross-check's (kernel_linux_test.go) network namespaces,
// each on a thread of its own, and its AF_PACKET capture.

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"e1kbox/internal/testenv"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// needPrivilege skips (or, with CI=true, fails) when the test cannot run.
func needPrivilege(t *testing.T, why string) {
	t.Helper()
	testenv.Unavailable(t, why)
}

// nsThread runs functions on one locked OS thread that lives in its own
// network namespace. The thread is never unlocked, so it exits with its
// goroutine and the namespace goes with it; the test's cleanup waits for
// that.
type nsThread struct{ work chan func() }

func newNSThread(t *testing.T) *nsThread {
	n := &nsThread{work: make(chan func())}
	errc := make(chan error)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- nil
		for fn := range n.work {
			fn()
		}
	}()
	if err := <-errc; err != nil {
		<-exited
		needPrivilege(t, fmt.Sprintf("unshare(CLONE_NEWNET): %v", err))
	}
	t.Cleanup(func() {
		close(n.work)
		<-exited
	})
	return n
}

func (n *nsThread) run(fn func() error) error {
	done := make(chan error)
	n.work <- func() { done <- fn() }
	return <-done
}

// nsSetup configures one end of the veth pair in the calling thread's namespace.
func nsSetup(name string, addrs ...string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	et, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("ethtool: %w", err)
	}
	defer et.Close()
	if err := et.Change(name, map[string]bool{"tx-checksum-ip-generic": false}); err != nil {
		return fmt.Errorf("%s: TX checksum offload off: %w", name, err)
	}
	feats, err := et.Features(name)
	if err != nil {
		return fmt.Errorf("%s features: %w", name, err)
	}
	if feats["tx-checksum-ip-generic"] {
		return fmt.Errorf("%s: TX checksum offload still on", name)
	}
	for _, a := range addrs {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		addr.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("address %s: %w", a, err)
		}
	}
	return netlink.LinkSetUp(link)
}

type captured struct {
	data    []byte
	status  uint32 // tp_status from PACKET_AUXDATA
	tci     uint16
	tpid    uint16
	hasVLAN bool
}

// capture reads frames from an AF_PACKET socket until stop is closed.
func capture(fd int, stop <-chan struct{}, out *[]captured, mu *sync.Mutex) {
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if err != nil {
			continue // EAGAIN from SO_RCVTIMEO: look at stop again
		}
		c := captured{data: slices.Clone(buf[:n])}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			// struct tpacket_auxdata: status, len, snaplen u32; mac, net, vlan_tci, vlan_tpid u16.
			if m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= 20 {
				c.status = binary.NativeEndian.Uint32(m.Data[0:])
				c.tci = binary.NativeEndian.Uint16(m.Data[16:])
				c.tpid = binary.NativeEndian.Uint16(m.Data[18:])
				c.hasVLAN = c.status&unix.TP_STATUS_VLAN_VALID != 0
				if c.status&unix.TP_STATUS_VLAN_TPID_VALID == 0 {
					c.tpid = 0
				}
			}
		}
		mu.Lock()
		*out = append(*out, c)
		mu.Unlock()
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
