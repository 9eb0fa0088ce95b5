package ispvm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
)

// bootPair boots an ISP VM and a client VM (pppd with the rp-pppoe
// plugin) at once, on taps bridged in a fresh namespace.
func bootPair(t *testing.T, isp Config) (ns *netnstest.Namespace, server, client *VM) {
	testenv.Require(t, Needs...)
	img, err := Build(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	ns = netnstest.New(t, "ispvm")
	ns.IP(t, "link", "add", "br0", "type", "bridge")
	ns.IP(t, "link", "set", "br0", "up")
	for _, tap := range []string{"isp0", "cli0"} {
		ns.IP(t, "tuntap", "add", "dev", tap, "mode", "tap")
		ns.IP(t, "link", "set", tap, "master", "br0", "up")
	}
	if isp.MRU > 1492 { // RFC 4638: the bridge forwards the VMs' MRU+8
		for _, dev := range []string{"isp0", "cli0", "br0"} {
			ns.IP(t, "link", "set", dev, "mtu", fmt.Sprint(isp.MRU+8))
		}
	}
	cli := isp
	cli.client, cli.MAC = true, "52:54:00:15:50:02"
	isp.Netns, isp.Tap = ns.Name(), "isp0"
	cli.Netns, cli.Tap = ns.Name(), "cli0"
	type result struct {
		vm  *VM
		err error
	}
	results := make(chan result, 2)
	for _, c := range []Config{isp, cli} {
		dir := t.TempDir()
		go func() {
			vm, err := Boot(img, c, dir)
			results <- result{vm, err}
		}()
	}
	for range 2 {
		r := <-results
		if r.vm != nil {
			t.Cleanup(func() {
				r.vm.Stop()
				if t.Failed() {
					t.Logf("%s VM console:\n%s", map[bool]string{true: "client", false: "ISP"}[r.vm.Config.client], r.vm.Console())
				}
			})
			if r.vm.Config.client {
				client = r.vm
			} else {
				server = r.vm
			}
		}
		if r.err != nil {
			t.Error(r.err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("booted in %v (ISP) and %v (client)", server.BootTime.Round(10*time.Millisecond), client.BootTime.Round(10*time.Millisecond))
	return ns, server, client
}

// wantUp waits for an "up" event on vm with the local and remote address.
func wantUp(t *testing.T, vm *VM, who, local, remote string) {
	t.Helper()
	ev, err := vm.WaitEvent(60*time.Second, "up")
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	if len(ev.Args) < 3 || ev.Args[1] != local || ev.Args[2] != remote {
		t.Fatalf("%s: up %v, want ppp? %s %s", who, ev.Args, local, remote)
	}
}

// isPADT reports whether frame is a PADT from the MAC src on vlan (0:
// untagged).
func isPADT(frame []byte, src string, vlan int) bool {
	mac, err := net.ParseMAC(src)
	if err != nil || len(frame) < 14 || !bytes.Equal(frame[6:12], mac) {
		return false
	}
	b := frame[12:]
	tagged := binary.BigEndian.Uint16(b) == unix.ETH_P_8021Q && len(b) >= 4
	if tagged {
		if int(binary.BigEndian.Uint16(b[2:])&0xfff) != vlan {
			return false
		}
		b = b[4:]
	}
	return tagged == (vlan != 0) && len(b) >= 6 && binary.BigEndian.Uint16(b) == 0x8863 && b[3] == 0xa7
}

// first is the first word of s, or "".
func first(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

func vmRun(t *testing.T, vm *VM, cmd string) string {
	t.Helper()
	out, err := vm.Run(cmd, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSession brings a PPPoE session up against the ISP VM from a client
// VM, with PAP and with CHAP (CHAP inside VLAN 7), and checks what the
// harness promises: IPCP addresses and DNS, the upstream host over IPv4
// and from the delegated IPv6 prefix, the web server's /big and the
// upload sink's checksums, a server-side disconnect (with a PADT, and a
// new delegated prefix from SetPrefix on reconnect) and a server that stops
// answering LCP echo.
func TestSession(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{name: "pap", cfg: Config{}},
		{name: "chap-vlan7", cfg: Config{CHAP: true, VLAN: 7, User: "user@isp", Password: "p4ss", LCPEcho: 1}},
		// The kernel-mode access concentrator (acd) at RFC 4638's 1500.
		{name: "kernel-pap-mru1500", cfg: Config{KernelMode: true, MRU: 1500}},
		// The ISP's LCP echo every 5 s: at full speed in the kernel a TCG
		// VM on a loaded host can starve pppd for the 3 s that 1 s allows.
		{name: "kernel-chap-vlan7-mru1500", cfg: Config{KernelMode: true, MRU: 1500, CHAP: true, VLAN: 7, User: "user@isp", Password: "p4ss", LCPEcho: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.DNS = []netip.Addr{netip.MustParseAddr("192.0.2.53")}
			ns, server, client := bootPair(t, tc.cfg)
			wantUp(t, client, "client", "10.64.0.2", "10.64.0.1")
			wantUp(t, server, "ISP", "10.64.0.1", "10.64.0.2")
			if got := vmRun(t, client, "cat /etc/ppp/resolv.conf"); !strings.Contains(got, "192.0.2.53") {
				t.Errorf("client's DNS from IPCP: %q, want 192.0.2.53", got)
			}
			vmRun(t, client, "ping -c 1 -W 5 198.51.100.1")
			if tc.cfg.KernelMode {
				checkKernelSession(t, ns, server, client)
			}
			sum := vmRun(t, client, "wget -q -O - http://198.51.100.1/big | sha256sum")
			if !strings.HasPrefix(sum, server.Image.BigSHA256) {
				t.Errorf("/big over the session: sha256 %q, want %s", sum, server.Image.BigSHA256)
			}
			up := vmRun(t, client, "head -c 1000000 /www/big | nc -w 10 198.51.100.1 9000")
			local := vmRun(t, client, "head -c 1000000 /www/big | sha256sum")
			if first(up) != first(local) || first(local) == "" {
				t.Errorf("upload sink answered %q, want %q", up, local)
			}

			// IPv6: the client's dibbler-client gets the prefix delegated; an
			// address from it reaches the upstream host.
			if _, err := client.WaitEvent(30*time.Second, "up6"); err != nil {
				t.Fatalf("client: %v", err)
			}
			netnstest.WaitFor(t, 60*time.Second, "the client's delegated prefix", func() bool {
				out, _ := client.Run("cat /var/lib/dibbler/client-AddrMgr.xml", 10*time.Second)
				return strings.Contains(out, ">2001:db8:100::</AddrPrefix>")
			})
			vmRun(t, client, "ip -6 addr add 2001:db8:100:1::1/128 dev lo")
			vmRun(t, client, "ping6 -c 1 -W 5 -I 2001:db8:100:1::1 2001:db8:ffff::1")
			sum6 := vmRun(t, client, "wget -q -O - http://[2001:db8:ffff::1]/big | sha256sum")
			if !strings.HasPrefix(sum6, server.Image.BigSHA256) {
				t.Errorf("/big over IPv6: sha256 %q, want %s", sum6, server.Image.BigSHA256)
			}

			// A server-side disconnect ends the session on both sides,
			// with a PADT from the server (tagged like the session); the
			// client (persist) comes back.
			port := openRaw(t, ns, "isp0")
			if err := server.SetPrefix(netip.MustParsePrefix("2001:db8:200::/56")); err != nil {
				t.Fatal(err)
			}
			if err := server.Disconnect(); err != nil {
				t.Fatal(err)
			}
			for _, vm := range []*VM{server, client} {
				if _, err := vm.WaitEvent(30*time.Second, "down"); err != nil {
					t.Fatalf("after Disconnect: %v", err)
				}
			}
			// The PADT follows pppd's exit, which waits for its ip-down
			// scripts: seconds on a loaded machine.
			padt := false
			for end := time.Now().Add(10 * time.Second); !padt && time.Now().Before(end); {
				if f := port.recv(); f != nil {
					padt = isPADT(f, server.Config.MAC, tc.cfg.VLAN)
				}
			}
			if !padt {
				t.Errorf("no PADT (VLAN %d) from the server after Disconnect", tc.cfg.VLAN)
			}
			// pppoe-server frees the old session's address only once its
			// pppd has gone: the new session may get the next one.
			if ev, err := client.WaitEvent(60*time.Second, "up"); err != nil {
				t.Fatalf("client after Disconnect: %v", err)
			} else if len(ev.Args) < 3 || !strings.HasPrefix(ev.Args[1], "10.64.0.") || ev.Args[2] != "10.64.0.1" {
				t.Fatalf("client after Disconnect: up %v, want ppp? 10.64.0.x 10.64.0.1", ev.Args)
			}
			// The ISP's pppd passes IP only once its own IPCP is up, which
			// can come after the client's (the kernel-mode server is fast
			// enough for a ping to fall in between).
			if _, err := server.WaitEvent(60*time.Second, "up"); err != nil {
				t.Fatalf("ISP after Disconnect: %v", err)
			}
			vmRun(t, client, "ping -c 1 -W 5 198.51.100.1")
			// The new session delegates the prefix SetPrefix set.
			netnstest.WaitFor(t, 60*time.Second, "the new delegated prefix", func() bool {
				out, _ := client.Run("cat /var/lib/dibbler/client-AddrMgr.xml", 10*time.Second)
				return strings.Contains(out, ">2001:db8:200::</AddrPrefix>")
			})
			vmRun(t, client, "ip -6 addr add 2001:db8:200:1::1/128 dev lo")
			vmRun(t, client, "ping6 -c 1 -W 5 -I 2001:db8:200:1::1 2001:db8:ffff::1")

			// A frozen server answers no LCP echo: the client's pppd
			// (echo every second, 3 failures) ends the session.
			if err := server.Freeze(); err != nil {
				t.Fatal(err)
			}
			frozen := time.Now()
			if _, err := client.WaitEvent(30*time.Second, "down"); err != nil {
				t.Fatalf("after Freeze: %v", err)
			}
			t.Logf("client noticed the frozen server after %v", time.Since(frozen).Round(100*time.Millisecond))
			if err := server.Thaw(); err != nil {
				t.Fatal(err)
			}
			if _, err := client.WaitEvent(60*time.Second, "up"); err != nil {
				t.Fatalf("after Thaw: %v", err)
			}
		})
	}
}
