package nat

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/appliance/dataplane/routing"
)

// TestConcurrent runs pairs of LAN and WAN workers on their own
// goroutines: the LAN one opens UDP connections, the WAN one answers them
// at the same time (both touch the same entries), each prefetching its
// frames first, while another goroutine lists, deletes and sweeps and
// two more prefetch frames of live, dying and unknown connections
// without pause (lock-free reads of the index while it changes). Run
// with -race.
func TestConcurrent(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConns = 2048
	cfg.PortMin, cfg.PortMax = 10000, 60000
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const pairs, flows, rounds = 3, 300, 4
	type mapped struct {
		nat, sport uint16
		host       netip.Addr
	}
	// The goroutines report on errs (never blocking: past its buffer the
	// test has failed already). The prefetchers run until the workers are
	// done, or the test is: its context ends before the cleanup joins
	// them all.
	prefetching, stopPrefetch := context.WithCancel(t.Context())
	var wg, pfWG sync.WaitGroup
	t.Cleanup(func() {
		wg.Wait()
		pfWG.Wait()
	})
	var exact atomic.Int64
	errs := make(chan string, 1000)
	report := func(e string) {
		select {
		case errs <- e:
		default:
		}
	}
	for g := range pairs {
		lan, wan := r.NewWorker(nil), r.NewWorker(nil)
		hostIP := netip.AddrFrom4([4]byte{192, 168, 1, byte(101 + g)})
		hm := mac(byte(0x40 + g))
		now := t0
		lan.Handle(now, lanPort, frametest.ARPFrame(bcast, hm, 1, hm, a4(hostIP), [6]byte{}, a4(lanAddr)))
		wan.Handle(now, wanPort, frametest.ARPFrame(bcast, gwMAC, 1, gwMAC, a4(gwAddr), [6]byte{}, a4(wanAddr)))
		ch := make(chan mapped, 64)
		wg.Go(func() {
			defer close(ch)
			var f frame.Frame
			now := now
			for round := range rounds {
				for i := range flows {
					sp := uint16(20000 + g*1000 + i)
					b := fromLAN(hm, frametest.IPv4{Src: a4(hostIP), Dst: a4(remote)}.UDPPacket(sp, 53, []byte{byte(round)}))
					lan.Prefetch(lanPort, b)
					res := lan.Handle(now, lanPort, b)
					drain(lan)
					if res.Action != routing.Forward {
						if res.Reason != ReasonTableFull {
							report("lan: " + res.Action.String() + " " + res.Reason.String())
						}
						continue
					}
					if err := frame.Parse(res.Frame, &f); err != nil {
						report(err.Error())
						continue
					}
					ch <- mapped{f.UDP.SrcPort, sp, hostIP}
				}
				now += 40 * sec
				lan.Tick(now)
			}
		})
		wg.Go(func() {
			var f frame.Frame
			for m := range ch {
				b := fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(53, m.nat, nil))
				wan.Prefetch(wanPort, b)
				back := wan.Handle(now, wanPort, b)
				drain(wan)
				switch back.Action {
				case routing.Forward:
					// The mapping may have been deleted or expired and
					// given to another host since: the reply must reach a
					// LAN endpoint that exists, with right checksums.
					if err := frame.Parse(back.Frame, &f); err != nil {
						report(err.Error())
						break
					}
					if err := frame.VerifyChecksums(back.Frame, &f); err != nil {
						report("reply: " + err.Error())
					}
					h := int(f.IPv4.Dst[3]) - 101
					if h < 0 || h >= pairs || int(f.UDP.DstPort)-20000-h*1000 < 0 || int(f.UDP.DstPort)-20000-h*1000 >= flows {
						report(fmt.Sprintf("reply to %d went to %v:%d, no such endpoint", m.nat, f.IPv4.DstAddr(), f.UDP.DstPort))
					} else if f.IPv4.DstAddr() == m.host && f.UDP.DstPort == m.sport {
						exact.Add(1)
					}
				case routing.ToHost: // deleted or expired meanwhile
				default:
					report("wan: " + back.Action.String() + " " + back.Reason.String())
				}
				wan.Tick(now)
			}
		})
	}
	for g := range 2 {
		pw := r.NewWorker(nil)
		pfWG.Go(func() {
			lan := make([][]byte, 0, pairs*flows)
			for h := range pairs {
				for i := range flows {
					hostIP := netip.AddrFrom4([4]byte{192, 168, 1, byte(101 + h)})
					lan = append(lan, fromLAN(mac(byte(0x40+h)), frametest.IPv4{Src: a4(hostIP), Dst: a4(remote)}.UDPPacket(uint16(20000+h*1000+i), 53, nil)))
				}
			}
			wan := make([][]byte, 0, cfg.PortMax-cfg.PortMin+1)
			for p := cfg.PortMin; p <= cfg.PortMax; p += 7 {
				wan = append(wan, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.UDPPacket(53, p, nil)))
			}
			for i := g; ; i++ {
				select {
				case <-prefetching.Done():
					return
				default:
				}
				pw.Prefetch(lanPort, lan[i%len(lan)])
				pw.Prefetch(wanPort, wan[i%len(wan)])
			}
		})
	}
	wg.Go(func() {
		for i := range 50 {
			cs, _ := r.Conns(Filter{}, 0, 100, t0, nil)
			if i%5 == 0 && len(cs) > 0 {
				r.DeleteConn(cs[0].ID)
			}
			r.CountConns(Filter{Proto: frame.ProtoUDP})
			r.ct.sweep(uint32(t0/sec)+100, 64)
			r.Stats()
		}
	})
	wg.Wait()
	stopPrefetch()
	pfWG.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if st := r.Stats(); st.Actions[routing.Forward] < pairs*flows {
		t.Errorf("only %d frames forwarded", st.Actions[routing.Forward])
	}
	if n := exact.Load(); n < pairs*flows/2 {
		t.Errorf("only %d replies reached the endpoint they answered", n)
	}
	// Everything expires; the table and mappings end empty.
	r.ct.sweep(uint32(t0/sec)+10000, len(r.ct.entries))
	if n := r.CountConns(Filter{}); n != 0 {
		t.Errorf("%d connections left after expiry", n)
	}
	if n := r.maps.active(frame.ProtoUDP); n != 0 {
		t.Errorf("%d mappings left after expiry", n)
	}
	for i := range r.ct.stripes {
		if u := r.ct.stripes[i].used; u != 0 {
			t.Fatalf("stripe %d has %d index slots used", i, u)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	e := newEnv(t, nil)
	out := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPSyn}, nil))
	e.forward(LAN, out, wanPort)
	e.forward(WAN, fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 1000, Flags: frame.TCPSyn | frame.TCPAck}, nil)), lanPort)
	ack := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote)}.TCPPacket(frametest.TCP{SrcPort: 1000, DstPort: 80, Flags: frame.TCPAck}, make([]byte, 400)))
	in := fromWAN(frametest.IPv4{Src: a4(remote), Dst: a4(wanAddr)}.TCPPacket(frametest.TCP{SrcPort: 80, DstPort: 1000, Flags: frame.TCPAck}, make([]byte, 400)))
	ping := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(lanAddr)}.ICMPPacket(8, 0, 1, []byte("0123456789")))
	arpReq := frametest.ARPFrame(bcast, hostA, 1, hostA, a4(ipA), [6]byte{}, a4(lanAddr))
	ttl1 := fromLAN(hostA, frametest.IPv4{Src: a4(ipA), Dst: a4(remote), TTL: 1}.UDPPacket(1, 2, nil))
	bufA, bufB := make([]byte, len(ack)), make([]byte, len(in))
	var f frame.Frame
	sp := uint16(0)
	for _, tc := range []struct {
		name string
		run  func()
	}{
		{"established lan to wan", func() {
			copy(bufA, ack)
			frame.Parse(bufA, &f)
			if e.lan.Process(e.now, lanPort, bufA, &f).Action != routing.Forward {
				t.Fatal("not forwarded")
			}
		}},
		{"established wan to lan", func() {
			copy(bufB, in)
			if e.wan.Handle(e.now, wanPort, bufB).Action != routing.Forward {
				t.Fatal("not forwarded")
			}
		}},
		{"new connection", func() {
			sp++
			b := fromLANBuf(bufA, ack, sp)
			if res := e.lan.Handle(e.now, lanPort, b); res.Action != routing.Forward {
				t.Fatalf("new: %v %v", res.Action, res.Reason)
			}
		}},
		{"echo reply", func() {
			copy(bufB, ping)
			if e.lan.Handle(e.now, lanPort, bufB[:len(ping)]).Action != routing.Reply {
				t.Fatal("no echo reply")
			}
		}},
		{"arp reply", func() {
			copy(bufB, arpReq)
			if e.lan.Handle(e.now, lanPort, bufB[:len(arpReq)]).Action != routing.Reply {
				t.Fatal("no ARP reply")
			}
		}},
		{"time exceeded", func() {
			copy(bufB, ttl1)
			if e.lan.Handle(e.now, lanPort, bufB[:len(ttl1)]).Action != routing.Reply {
				t.Fatal("no time exceeded")
			}
			e.now += sec // stay under the ICMP rate limit
		}},
		{"tick", func() { e.lan.Tick(e.now) }},
	} {
		if n := testing.AllocsPerRun(200, tc.run); n != 0 {
			t.Errorf("%s: %v allocations per packet, want 0", tc.name, n)
		}
	}
}

// fromLANBuf copies the TCP ACK frame b into buf and makes it a SYN from
// source port sp (checksum fixed): a new connection, without allocating.
func fromLANBuf(buf, b []byte, sp uint16) []byte {
	copy(buf, b)
	var f frame.Frame
	frame.Parse(buf, &f)
	frame.SetSrcPort(buf, &f, sp)
	buf[f.L4Off+13] = frame.TCPSyn
	c := uint16(buf[f.L4Off+16])<<8 | uint16(buf[f.L4Off+17])
	c = frame.Update16(c, uint16(buf[f.L4Off+12])<<8|frame.TCPAck, uint16(buf[f.L4Off+12])<<8|frame.TCPSyn)
	buf[f.L4Off+16], buf[f.L4Off+17] = byte(c>>8), byte(c)
	return buf
}
