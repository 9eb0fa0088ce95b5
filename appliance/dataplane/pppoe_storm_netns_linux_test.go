package dataplane

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/appliance/services/pppoe"
	"e1kbox/internal/ispvm"
)

// fakeACs answers each PADI the box sends on the WAN with a PADO from
// each of n fake ACs at once, before the ISP's VM can (it runs under
// TCG), until the test ends; they never answer a PADR. The counts it
// returns are the PADIs it answered and the PADRs sent to the fakes.
func (h *hostileWAN) fakeACs(n int) (counts func() (padis, padrsToFakes int)) {
	t := h.t
	fd := -1
	h.isp.Do(t, func() {
		ifi, err := net.InterfaceByName("wan0")
		if err != nil {
			t.Fatal(err)
		}
		// ETH_P_ALL: a bridge port's frames reach only the taps of every
		// protocol (the bridge takes them before a protocol's handlers).
		proto := int(htons(unix.ETH_P_ALL))
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			t.Fatal(err)
		}
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
		tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: ifi.Index}); err != nil {
			t.Fatal(err)
		}
	})
	to := &unix.SockaddrLinklayer{Protocol: htons(0x8863)}
	if sa, err := unix.Getsockname(fd); err == nil {
		to.Ifindex = sa.(*unix.SockaddrLinklayer).Ifindex
	}
	box := macOf(h.e.PPPoE().MAC())
	var fakes [][6]byte
	for i := range n {
		fakes = append(fakes, [6]byte{0x02, 0xfa, 0xce, 0, 0, byte(i + 1)})
	}
	var padis, padrs, sendErrs atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil || n < 20 || [6]byte(buf[6:12]) != box || binary.BigEndian.Uint16(buf[12:]) != 0x8863 {
				continue
			}
			f := buf[:n]
			switch f[15] {
			case codePADR:
				if slices.Contains(fakes, [6]byte(f[0:6])) {
					padrs.Add(1)
				}
			case codePADI:
				padis.Add(1)
				hu := discoveryTag(f[20:], tagHostUniq)
				for _, mac := range fakes {
					pado := pppoeFrame(box, mac, 0x8863, 0x11, codePADO, 0, -1,
						discoveryTags(tagACName, []byte("fake-"+net.HardwareAddr(mac[:]).String()), tagServiceName, []byte{}, tagHostUniq, hu))
					if unix.Sendto(fd, pado, 0, to) != nil {
						sendErrs.Add(1)
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		unix.Close(fd)
		if n := sendErrs.Load(); n > 0 {
			t.Errorf("the fake ACs failed to send %d PADOs", n)
		}
	})
	return func() (int, int) { return int(padis.Load()), int(padrs.Load()) }
}

// discoveryTag is the value of the first tag typ in PPPoE tags b (nil if none).
func discoveryTag(b []byte, typ uint16) []byte {
	for len(b) >= 4 {
		t, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if 4+n > len(b) {
			return nil
		}
		if t == typ {
			return b[4 : 4+n]
		}
		b = b[4+n:]
	}
	return nil
}

// waitUpCounting is waitUp with the fake ACs' counts in its failure.
func (h *hostileWAN) waitUpCounting(d time.Duration, counts func() (int, int)) pppoe.Status {
	h.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-h.events:
			h.apply(ev.Status)
			if ev.Up && ev.Status.LocalIPv4.IsValid() {
				return ev.Status
			}
		case <-deadline:
			padis, padrs := counts()
			h.t.Fatalf("no session within %v: client %+v; %d PADIs, %d PADRs to the fake ACs", d, h.client.Status(), padis, padrs)
		}
	}
}

// TestEnginePPPoEStorm: with a session up, 2000 PADTs that are not the
// AC's for the session (other session IDs from the AC, the session's ID
// from other MACs, broadcast) leave it up; then, while three fake ACs
// answer every PADI first and never a PADR, the client reaches the ISP's
// AC after a server-side disconnect (passing over the fakes that led
// nowhere), and, configured with the ISP's AC-Name, at once.
func TestEnginePPPoEStorm(t *testing.T) {
	const acName = "isp-storm"
	h := newHostileWAN(t, ispvm.Config{ACName: acName}, nil)
	st := h.waitUp(60 * time.Second)
	box, ac := macOf(h.e.PPPoE().MAC()), macOf(st.ACMAC)
	r := rand.New(rand.NewPCG(1, 2))
	ignored := h.client.Status().Ignored
	for i := range 2000 {
		src, dst, sid := ac, box, st.SessionID^uint16(1+r.IntN(0xfffe))
		switch i % 3 {
		case 1:
			src, sid = [6]byte{0x02, 0xba, 0xd0, 0, byte(i >> 8), byte(i)}, st.SessionID
		case 2:
			src, dst, sid = [6]byte{0x02, 0xba, 0xd0, 1, byte(i >> 8), byte(i)}, [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, st.SessionID
		}
		h.inject.Send(t, pppoeFrame(dst, src, 0x8863, 0x11, codePADT, sid, -1, nil))
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)
	h.stillUp("after 2000 foreign PADTs", st)
	if got := h.client.Status().Ignored - ignored; got < 2000 {
		t.Errorf("the client ignored %d frames, want the 2000 PADTs", got)
	}

	poll := h.fakeACs(3)
	if err := h.vm.Disconnect(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	h.wait(30*time.Second, false)
	st = h.waitUpCounting(90*time.Second, poll)
	padis, padrs := poll()
	t.Logf("with 3 fake ACs answering first: session %#x with %q %v after the disconnect; %d PADIs, %d PADRs to the fakes",
		st.SessionID, st.ACName, time.Since(start).Round(100*time.Millisecond), padis, padrs)
	if st.ACName != acName || padis == 0 {
		t.Errorf("session with %q after %d PADIs, want %q, the fakes answering", st.ACName, padis, acName)
	}
	// Each fake gets the client's 3 PADRs once, then it is passed over
	// (before, the client went back to whichever AC answered first).
	if padrs > 3*3 {
		t.Errorf("%d PADRs to the 3 fake ACs, want at most 3 each", padrs)
	}
	h.traffic(st.LocalIPv4)

	cfg := pppoe.Config{User: h.vm.Config.User, Password: h.vm.Config.Password, MAC: h.e.PPPoE().MAC(), ACName: acName,
		EchoInterval: time.Second, EchoFailures: 3, Backoff: 200 * time.Millisecond,
		OnEvent: func(ev pppoe.Event) {
			select {
			case h.events <- ev:
			default:
			}
		}}
	start = time.Now()
	if err := h.client.Reconfigure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	h.wait(30*time.Second, false)
	st = h.waitUpCounting(60*time.Second, poll)
	padis2, padrs2 := poll()
	t.Logf("configured with AC-Name %q: session %#x %v after the reconfiguration; %d PADIs, %d PADRs to the fakes",
		acName, st.SessionID, time.Since(start).Round(100*time.Millisecond), padis2-padis, padrs2-padrs)
	if st.ACName != acName || padrs2 != padrs {
		t.Errorf("session with %q, %d more PADRs to the fakes; want %q, none", st.ACName, padrs2-padrs, acName)
	}
	h.traffic(st.LocalIPv4)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
