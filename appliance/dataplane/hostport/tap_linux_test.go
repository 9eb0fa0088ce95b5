package hostport

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// inNetns runs fn on a locked thread inside a fresh network namespace
// (deleted afterwards). It skips without root, and fails under CI=true.
func inNetns(t *testing.T, fn func()) {
	t.Helper()
	testenv.Require(t, "root", "ip", "/dev/net/tun")
	netnstest.New(t, "hpt").Do(t, fn)
}

// background runs fn on a goroutine of its own and returns where its
// error goes. The test's cleanup closes p, which ends a Wait in fn, and
// waits for the goroutine to end.
func background(t *testing.T, p *Port, fn func() error) <-chan error {
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		done <- fn()
	}()
	t.Cleanup(func() {
		p.Close()
		<-exited
	})
	return done
}

func TestTapARP(t *testing.T) {
	inNetns(t, func() {
		kmac := net.HardwareAddr{0x02, 0xe1, 0, 0, 0, 1}
		p, err := Open(Config{Name: "tapt0", MTU: 1400, MAC: kmac, Addrs: []netip.Prefix{netip.MustParsePrefix("10.77.0.1/24"), netip.MustParsePrefix("fd77::1/64")}})
		if err != nil {
			t.Errorf("Open: %v", err)
			return
		}
		defer p.Close()
		if p.Name() != "tapt0" || p.MTU() != 1400 || p.MAC().String() != kmac.String() || p.Ifindex() == 0 {
			t.Errorf("port = %s mtu %d mac %s index %d", p.Name(), p.MTU(), p.MAC(), p.Ifindex())
		}
		// An ARP request for the kernel's address from a station on the bridge.
		me := [6]byte{0x02, 0xaa, 0, 0, 0, 9}
		req := make([]byte, 42)
		copy(req[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		copy(req[6:12], me[:])
		binary.BigEndian.PutUint16(req[12:], frame.EtherTypeARP)
		copy(req[14:], []byte{0, 1, 8, 0, 6, 4, 0, 1})
		copy(req[22:28], me[:])
		copy(req[28:32], []byte{10, 77, 0, 9})
		copy(req[38:42], []byte{10, 77, 0, 1})
		if err := p.Write(req); err != nil {
			t.Errorf("Write: %v", err)
			return
		}
		buf := make([]byte, 2048)
		var f frame.Frame
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			n, ok, err := p.Read(buf)
			if err != nil {
				t.Errorf("Read: %v", err)
				return
			}
			if !ok {
				if err := p.Wait(100 * time.Millisecond); err != nil {
					t.Errorf("Wait: %v", err)
					return
				}
				continue
			}
			// The kernel also sends IPv6 router solicitations and MLD
			// reports; look for the ARP reply.
			if frame.Parse(buf[:n], &f) != nil || f.EtherType != frame.EtherTypeARP || f.ARP.Op != 2 {
				continue
			}
			if f.Dst != me || f.ARP.SenderIP != [4]byte{10, 77, 0, 1} || net.HardwareAddr(f.ARP.SenderMAC[:]).String() != kmac.String() {
				t.Errorf("ARP reply %+v", f.ARP)
			}
			st := p.Stats()
			if st.Written != 1 || st.Read == 0 || st.WrittenBytes != 42 {
				t.Errorf("Stats = %+v", st)
			}
			return
		}
		t.Errorf("no ARP reply from the kernel within 3 s")
	})
}

func TestTapClose(t *testing.T) {
	inNetns(t, func() {
		p, err := Open(Config{Name: "tapt1"})
		if err != nil {
			t.Errorf("Open: %v", err)
			return
		}
		done := background(t, p, func() error {
			buf := make([]byte, 2048)
			for {
				if err := p.Wait(-1); err != nil {
					return err
				}
				for { // drain what the kernel sent (router solicitations, MLD)
					if _, ok, err := p.Read(buf); !ok || err != nil {
						break
					}
				}
			}
		})
		time.Sleep(50 * time.Millisecond)
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("Wait after Close = %v, want ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("Wait not woken by Close")
		}
		if err := p.Write(make([]byte, 60)); !errors.Is(err, ErrClosed) {
			t.Errorf("Write after Close = %v, want ErrClosed", err)
		}
		if _, _, err := p.Read(make([]byte, 60)); !errors.Is(err, ErrClosed) {
			t.Errorf("Read after Close = %v, want ErrClosed", err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		// The device is gone with the descriptor.
		deadline := time.Now().Add(2 * time.Second)
		for {
			if _, err := net.InterfaceByName("tapt1"); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("tapt1 still exists after Close")
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestTapWake: Wake ends a Wait once (the next runs to its timeout);
// after Close, Wait and Wake return ErrClosed.
func TestTapWake(t *testing.T) {
	inNetns(t, func() {
		// No IPv6 on the TAP: the kernel sends nothing on it (router
		// solicitations, MLD) that would end a Wait.
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0o644); err != nil {
			t.Errorf("disable IPv6: %v", err)
			return
		}
		p, err := Open(Config{Name: "tapw1"})
		if err != nil {
			t.Errorf("Open: %v", err)
			return
		}
		defer p.Close()
		done := background(t, p, func() error { return p.Wait(10 * time.Second) })
		time.Sleep(50 * time.Millisecond)
		if err := p.Wake(); err != nil {
			t.Errorf("Wake: %v", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Wait after Wake = %v, want nil", err)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("Wait not woken by Wake")
		}
		// The TAP is down: nothing to read, so the next Wait times out.
		start := time.Now()
		if err := p.Wait(200 * time.Millisecond); err != nil || time.Since(start) < 150*time.Millisecond {
			t.Errorf("Wait(200ms) after a taken Wake = %v after %v, want its timeout", err, time.Since(start))
		}
		if err := p.Wake(); err != nil {
			t.Errorf("Wake: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := p.Wait(time.Second); !errors.Is(err, ErrClosed) {
			t.Errorf("Wait after Wake and Close = %v, want ErrClosed", err)
		}
		if err := p.Wake(); !errors.Is(err, ErrClosed) {
			t.Errorf("Wake after Close = %v, want ErrClosed", err)
		}
	})
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Config{Name: strings.Repeat("x", 16)}); err == nil {
		t.Errorf("Open with a 16-byte name succeeded")
	}
}
