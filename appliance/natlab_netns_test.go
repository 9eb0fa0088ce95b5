package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"e1kbox/appliance/dataplane"
	"e1kbox/appliance/dataplane/afpacket"
	"e1kbox/internal/netnstest"
	"e1kbox/internal/testenv"
	"e1kbox/webui"
)

// The NAT suite runs the appliance binary in NAT mode in a box namespace
// between a LAN and a WAN:
//
//	lan (10.60.0.10/24, MTU 2000, gw .1)
//	  └─ p1 [box: lan 10.60.0.1/24 MTU 2000, host port 10.60.0.2 | wan 10.61.0.2/24 MTU 1500] p2
//	                                                                  └─ gw (10.61.0.1/24 | 10.62.0.1/24, forwarding)
//	                                                                       └─ inet (10.62.0.10/24): the internet's servers
//
// with port forwards of WAN tcp 8081 to the LAN host's 8080 and udp 8082
// to its 8082. With natLab.wanSegment the WAN is a segment instead of a
// cable: a Linux bridge in a namespace of its own joins p2, the gateway's
// eth0 and an attacker host (10.61.0.66/24). Helper programs (servers,
// many-connection clients) are this test binary run again in a namespace
// with E1KBOX_NAT_HELPER set (see natHelper).

const (
	natLANHost  = "10.60.0.10"
	natRouter   = "10.60.0.1"
	natBoxHost  = "10.60.0.2"
	natWANAddr  = "10.61.0.2"
	natGateway  = "10.61.0.1"
	natServer   = "10.62.0.10"
	natAttacker = "10.61.0.66"
)

// natNS are the indices of the lab's hosts.
const (
	nsLAN  = 1
	nsGW   = 2
	nsInet = 3
	nsAtk  = 4 // with natLab.wanSegment
)

func natConfigJSON(conntrackSize int) string {
	return fmt.Sprintf(`{
  "version": 2,
  "mode": "nat",
  "ports": [
    {"name": "lan", "interface": "p1", "role": "lan", "addresses": ["10.60.0.1/24"], "mtu": 2000},
    {"name": "wan", "interface": "p2", "role": "wan", "addresses": ["10.61.0.2/24"], "mtu": 1500}
  ],
  "hostPort": {"interface": "e1khost0", "addresses": ["10.60.0.2/24"]},
  "nat": {
    "gateway": "10.61.0.1",
    "conntrack": {"size": %d, "timeouts": {"udp": "2s", "udpStream": "3s"}},
    "forwards": [
      {"proto": "tcp", "wanPorts": "8081", "lanHost": "10.60.0.10", "lanPort": 8080},
      {"proto": "udp", "wanPorts": "8082", "lanHost": "10.60.0.10", "lanPort": 8082}
    ]
  }
}
`, conntrackSize)
}

// newNATLab builds the namespaces and starts the appliance with a
// conntrack table of size entries (and the extra flags).
func newNATLab(t *testing.T, size int, flags ...string) *lab {
	return natLab{config: natConfigJSON(size), flags: flags}.build(t)
}

// natLab is a NAT lab to build: the box's runtime config, its extra
// flags, and whether the WAN is a segment with an attacker on it.
type natLab struct {
	config     string
	flags      []string
	wanSegment bool
}

// build makes the namespaces and starts the appliance.
func (spec natLab) build(t *testing.T) *lab {
	requireNetns(t)
	testenv.Require(t, "traceroute")
	l := &lab{t: t, dir: t.TempDir()}
	prefixes := []string{"e1knb", "e1knl", "e1kng", "e1kni"}
	if spec.wanSegment {
		prefixes = append(prefixes, "e1kna")
	}
	for i, prefix := range prefixes {
		ns := netnstest.New(t, prefix)
		ns.IP(t, "link", "set", "lo", "up")
		if i == 0 {
			l.box = ns
		} else {
			l.hosts = append(l.hosts, ns)
		}
	}
	lan, gw, inet := l.hosts[0], l.hosts[1], l.hosts[2]
	lanEnd := natEnd(lan, "eth0", natLANHost+"/24")
	lanEnd.MTU = 2000
	netnstest.Veth(t, natEnd(l.box, "p1"), lanEnd)
	if spec.wanSegment {
		seg := netnstest.New(t, "e1kns")
		seg.IP(t, "link", "add", "br0", "type", "bridge", "stp_state", "0")
		netnstest.Veth(t, natEnd(l.box, "p2"), natEnd(seg, "sbox"))
		netnstest.Veth(t, natEnd(gw, "eth0", natGateway+"/24"), natEnd(seg, "sgw"))
		netnstest.Veth(t, natEnd(l.hosts[nsAtk-1], "eth0", natAttacker+"/24"), natEnd(seg, "satk"))
		for _, p := range []string{"sbox", "sgw", "satk"} {
			seg.IP(t, "link", "set", p, "master", "br0")
		}
		seg.IP(t, "link", "set", "br0", "up")
	} else {
		netnstest.Veth(t, natEnd(l.box, "p2"), natEnd(gw, "eth0", natGateway+"/24"))
	}
	netnstest.Veth(t, natEnd(gw, "eth1", "10.62.0.1/24"), natEnd(inet, "eth0", natServer+"/24"))
	lan.IP(t, "route", "add", "default", "via", natRouter)
	gw.Sysctl(t, "net.ipv4.ip_forward=1")
	inet.IP(t, "route", "add", "default", "via", "10.62.0.1")

	cfgPath := filepath.Join(l.dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(spec.config), 0o644); err != nil {
		t.Fatal(err)
	}
	l.start(append([]string{"-config", cfgPath, "-factory", filepath.Join(l.dir, "no-factory.json")}, spec.flags...)...)
	return l
}

// natEnd is a veth end of the NAT lab, up, with the given addresses and
// no offloads: frames must reach the rings whole, with checksums.
func natEnd(ns *netnstest.Namespace, dev string, addrs ...string) netnstest.End {
	return netnstest.End{NS: ns, Name: dev, Off: []string{"gro", "gso", "tso", "tx", "rx"}, Addrs: addrs, Up: true}
}

// helper starts this test binary as helper mode in namespace ns.
func (l *lab) helper(t *testing.T, ns int, mode string, args ...string) (*exec.Cmd, io.WriteCloser, *helperOutput) {
	t.Helper()
	return helperIn(t, l.hosts[ns-1], mode, args...)
}

// helperOutput is a helper's output, read line by line (see line).
type helperOutput struct {
	lines chan string // closed at its end
}

// helperIn starts this test binary as helper mode in namespace ns. A
// goroutine reads its output; at the test's cleanup the helper's stdin is
// closed, it is killed, and then the reader is ended and waited for.
func helperIn(t *testing.T, ns *netnstest.Namespace, mode string, args ...string) (*exec.Cmd, io.WriteCloser, *helperOutput) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := ns.Command(append([]string{self}, args...)...)
	cmd.Env = append(os.Environ(), "E1KBOX_NAT_HELPER="+mode)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	o := &helperOutput{lines: make(chan string)}
	background(t, func(stop <-chan struct{}) struct{} {
		defer close(o.lines)
		r := bufio.NewReader(out)
		for {
			s, err := r.ReadString('\n')
			if s != "" || err == nil {
				select {
				case o.lines <- strings.TrimSpace(s):
				case <-stop:
					return struct{}{}
				}
			}
			if err != nil {
				return struct{}{}
			}
		}
	})
	netnstest.Start(t, cmd)
	t.Cleanup(func() { in.Close() }) // before the kill
	return cmd, in, o
}

// line reads one line of a helper's output ("" after its end), failing
// after d.
func line(t *testing.T, o *helperOutput, d time.Duration) string {
	t.Helper()
	select {
	case s := <-o.lines:
		return s
	case <-time.After(d):
		t.Fatalf("helper said nothing for %v", d)
		return ""
	}
}

// serve runs the HTTP and TCP echo servers in namespace ns; the HTTP
// server logs the remote address of every request to the returned file.
func (l *lab) serve(t *testing.T, ns int, name string) string {
	t.Helper()
	log := filepath.Join(l.dir, name+".log")
	_, _, out := l.helper(t, ns, "serve", ":8080", ":7", log)
	if s := line(t, out, 5*time.Second); s != "serving" {
		t.Fatalf("server: %q", s)
	}
	return log
}

func (l *lab) conntrack(t *testing.T, query string) dataplane.ConnPage {
	t.Helper()
	code, body := l.boxGet("/api/conntrack?" + query)
	var wp webui.ConnPage
	if code != 200 {
		t.Fatalf("/api/conntrack?%s: %d %s", query, code, body)
	}
	if err := json.Unmarshal([]byte(body), &wp); err != nil {
		t.Fatalf("/api/conntrack: %v\n%s", err, body)
	}
	// The dashboard lists a connection by its original direction and
	// the translated addresses: the reply direction follows from them.
	p := dataplane.ConnPage{Total: wp.Total}
	for _, c := range wp.Entries {
		dc := dataplane.Conn{ID: c.ID, Proto: c.Proto, Kind: c.Kind, State: c.State,
			Orig: dataplane.ConnTuple{Src: c.Src, Dst: c.Dst}, Reply: dataplane.ConnTuple{Src: c.Dst, Dst: c.Src}}
		if c.NATSrc.IsValid() {
			dc.Reply.Dst = c.NATSrc
		}
		if c.NATDst.IsValid() {
			dc.Reply.Src = c.NATDst
		}
		p.Conns = append(p.Conns, dc)
	}
	return p
}

// boxSysctl reads a sysctl in the box namespace.
func (l *lab) boxSysctl(t *testing.T, key string) string {
	t.Helper()
	return strings.TrimSpace(l.box.Run(t, "sysctl", "-n", key))
}

// isRSTFrom matches an IPv4 TCP segment with RST set from src.
func isRSTFrom(src net.IP) func(afpacket.Packet) bool {
	return func(p afpacket.Packet) bool {
		d := p.Data
		if len(d) < 14+20+20 || binary.BigEndian.Uint16(d[12:]) != 0x0800 || d[14+9] != 6 {
			return false
		}
		ihl := int(d[14]&0xf) * 4
		return net.IP(d[14+12:14+16]).Equal(src) && len(d) >= 14+ihl+14 && d[14+ihl+13]&0x04 != 0
	}
}
