package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"

	"e1kbox/appliance/dataplane/frame"
	"e1kbox/appliance/dataplane/frame/frametest"
	"e1kbox/internal/netnstest"
	"e1kbox/webui"
)

// starvation is what a DHCP starvation did.
type starvation struct {
	Discovers, Offers, Requests, Acks int
	Err                               error
}

// startStarvation runs a DHCP starvation from eth0 of namespace ns, from
// its own goroutine: DISCOVERs from n random MACs (the Ethernet source
// too) paced over d, and a REQUEST for every address offered to one of
// them, as starvation tools do. wait returns what it did; the test's end
// stops it (see background).
func startStarvation(t *testing.T, ns *netnstest.Namespace, seed uint64, n int, d time.Duration) (wait func() starvation) {
	t.Helper()
	var fd, index int
	err := ns.In(func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		index = ifi.Index
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_IP))); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: index})
	})
	if err != nil {
		t.Fatalf("starvation socket in %s: %v", ns.Name(), err)
	}
	tv := unix.NsecToTimeval((10 * time.Millisecond).Nanoseconds())
	if err := errors.Join(unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	wait, _ = background(t, func(stop <-chan struct{}) (r starvation) {
		defer unix.Close(fd)
		rng := rand.New(rand.NewPCG(seed, seed))
		ours := map[dhcpv4.TransactionID]bool{}
		send := func(m *dhcpv4.DHCPv4) error {
			ip := frametest.IPv4{Dst: [4]byte{255, 255, 255, 255}}
			fr := frametest.Frame(bcast, [6]byte(m.ClientHWAddr), frame.EtherTypeIPv4, ip.UDPPacket(68, 67, m.ToBytes()))
			for {
				err := unix.Sendto(fd, fr, 0, &unix.SockaddrLinklayer{Ifindex: index})
				if err != unix.ENOBUFS {
					return err
				}
				time.Sleep(time.Millisecond)
			}
		}
		buf := make([]byte, 2048)
		start := time.Now()
		for !stopped(stop) && (r.Discovers < n || time.Since(start) < d+2*time.Second) {
			for due := min(n, int(time.Since(start)*time.Duration(n)/d)+1); r.Discovers < due; r.Discovers++ {
				mac := net.HardwareAddr{0x02, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
				m, err := dhcpv4.NewDiscovery(mac)
				if err == nil {
					ours[m.TransactionID] = true
					err = send(m)
				}
				if err != nil {
					r.Err = fmt.Errorf("DISCOVER: %w", err)
					return r
				}
			}
			// What the server said meanwhile (it broadcasts), for a
			// while: the DISCOVERs are due again.
			for until := time.Now().Add(20 * time.Millisecond); time.Now().Before(until); {
				k, _, err := unix.Recvfrom(fd, buf, 0)
				if err != nil {
					break // the receive timeout
				}
				reply := dhcpReply(buf[:k])
				if reply == nil || !ours[reply.TransactionID] {
					continue
				}
				switch reply.MessageType() {
				case dhcpv4.MessageTypeOffer:
					r.Offers++
					req, err := dhcpv4.NewRequestFromOffer(reply)
					if err == nil {
						err = send(req)
					}
					if err != nil {
						r.Err = fmt.Errorf("REQUEST: %w", err)
						return r
					}
					r.Requests++
				case dhcpv4.MessageTypeAck:
					r.Acks++
				}
			}
		}
		return r
	})
	return wait
}

// htons is v in network byte order, as a packet socket's protocol.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// dhcpReply decodes an Ethernet frame carrying a DHCP reply (UDP to port
// 68); nil for anything else.
func dhcpReply(f []byte) *dhcpv4.DHCPv4 {
	if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[14+9] != 17 {
		return nil
	}
	ihl := int(f[14]&0xf) * 4
	if len(f) < 14+ihl+8 || binary.BigEndian.Uint16(f[14+ihl+2:]) != 68 {
		return nil
	}
	m, err := dhcpv4.FromBytes(f[14+ihl+8:])
	if err != nil || m.OpCode != dhcpv4.OpcodeBootReply {
		return nil
	}
	return m
}

// dhcpView is what the test reads of the DHCP server's status and
// devices (its own types: the test also runs against a box from before
// they had these fields).
type dhcpView struct {
	DHCP struct {
		LeasesInUse int    `json:"leases_in_use"`
		PoolSize    int    `json:"pool_size"`
		Unproven    int    `json:"unproven"`
		Reclaimed   uint64 `json:"reclaimed"`
		Refused     uint64 `json:"refused"`
		Ports       []struct {
			Port               string
			Unproven           int
			Reclaimed, Refused uint64
			Revived            uint64
			Flooding           bool
		} `json:"ports"`
	} `json:"dhcp"`
}

// TestServicesDHCPStarvation: a LAN host (h2, on port lan2) runs a DHCP
// starvation at the box's 150-address pool, DISCOVER and REQUEST from
// 2000 random MACs over 20 s. A device that holds a lease and uses it
// (h1, pinging through the box) keeps it and renews it; a new device (h3,
// udhcpc, on lan3) gets a lease within 30 s during the flood; the alarm
// names the flooding port.
func TestServicesDHCPStarvation(t *testing.T) {
	t.Parallel()
	l := newSvcLab(t)
	l.wan(t, 20*time.Second, "")
	cfg := strings.Replace(svcConfig, `"dhcp": {"leaseTime": "10m",`, `"dhcp": {"leaseTime": "10m", "range": "192.168.7.100-192.168.7.249",`, 1)
	l.apply(t, cfg, true)

	user, newcomer := l.clients[0], l.clients[2]
	userProc := user.Udhcpc(t)
	ev1, _ := user.WaitEvent(t, 0, "bound")
	netnstest.Start(t, l.lan[0].Command("ping", "-q", "-i", "0.5", svcISP)) // h1 uses its address
	l.mustHost(t, 1, "ping", "-c", "1", "-W", "2", svcISP)

	// The pool's use, sampled through the flood.
	var maxInUse, maxUnproven atomic.Int64
	_, endSampler := background(t, func(stop <-chan struct{}) error {
		for !stopped(stop) {
			var v dhcpView
			if code, body := l.boxGet("/api/router"); code == 200 && json.Unmarshal([]byte(body), &v) == nil {
				maxInUse.Store(max(maxInUse.Load(), int64(v.DHCP.LeasesInUse)))
				maxUnproven.Store(max(maxUnproven.Load(), int64(v.DHCP.Unproven)))
			}
			time.Sleep(250 * time.Millisecond)
		}
		return nil
	})

	const floodMACs, floodOver = 2000, 20 * time.Second
	began := time.Now()
	flood := startStarvation(t, l.lan[1], 1, floodMACs, floodOver)
	time.Sleep(5 * time.Second) // the flood has had its go at the pool

	asked := time.Now()
	newcomer.Udhcpc(t)
	var tookNew time.Duration
	for tookNew == 0 && time.Since(asked) < 30*time.Second {
		for _, ev := range newcomer.Events() {
			if ev["event"] == "bound" && strings.HasPrefix(ev["ip"], "192.168.7.") {
				tookNew = time.Since(asked)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if tookNew == 0 {
		t.Errorf("the new device on lan3 got no lease within 30 s during the flood: %v", newcomer.Events())
	}

	from := len(user.Events())
	userProc.Process.Signal(syscall.SIGUSR1) // renew now, during the flood
	if ev, _ := user.WaitEvent(t, from, "renew", "bound"); ev["ip"] != ev1["ip"] {
		t.Errorf("h1, which uses its address, renewing during the flood: %v, want %s again", ev, ev1["ip"])
	}
	if time.Since(began) > floodOver {
		t.Logf("the flood was over before the renewal (%v)", time.Since(began).Round(time.Second))
	}

	res := flood()
	endSampler()
	if res.Err != nil {
		t.Errorf("the flood: %v", res.Err)
	}
	var v dhcpView
	getJSON(t, l.lab, "/api/router", &v)
	var devs struct {
		Devices []struct {
			MAC, State string
			Address    string
			Unproven   bool
		}
	}
	getJSON(t, l.lab, "/api/devices", &devs)
	for _, d := range devs.Devices {
		if d.MAC == "02:77:00:00:00:01" && (d.Address != ev1["ip"] || d.State != "bound" || d.Unproven) {
			t.Errorf("h1 on the Devices page: %+v, want its %s bound and in use", d, ev1["ip"])
		}
	}
	t.Logf("the flood: %d MACs over %v (%+v); the pool: %d addresses, at most %d leases in use, %d of them unproven; "+
		"%d reclaimed, %d refused, ports %+v; the new device's lease after %v",
		floodMACs, floodOver, res, v.DHCP.PoolSize, maxInUse.Load(), maxUnproven.Load(), v.DHCP.Reclaimed, v.DHCP.Refused,
		v.DHCP.Ports, tookNew.Round(100*time.Millisecond))
	var alarms []string // raised within 5 s, held for 5 minutes
	eventually(t, 15*time.Second, "the dhcp_flood alarm naming lan2", func() (bool, string) {
		var m webui.StatsMessage
		getJSON(t, l.lab, "/api/stats", &m)
		alarms = alarms[:0]
		for _, a := range m.Alarms {
			alarms = append(alarms, a.Kind+"@"+a.Port+": "+a.Message)
			if a.Kind == "dhcp_flood" && a.Port == "lan2" {
				return true, ""
			}
		}
		return false, fmt.Sprint(alarms)
	})
}
