package capture

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/net/bpf"
)

// frame builds an Ethernet frame: IPv4 or IPv6 with a TCP/UDP header (or
// ICMP), or an ARP request.
func frame(src, dst string, proto uint8, sport, dport uint16, fragOff uint16) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	b := make([]byte, 14, 128)
	if s.Is4() {
		binary.BigEndian.PutUint16(b[12:], 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[6:], fragOff)
		ip[8], ip[9] = 64, proto
		copy(ip[12:], s.AsSlice())
		copy(ip[16:], d.AsSlice())
		b = append(b, ip...)
	} else {
		binary.BigEndian.PutUint16(b[12:], 0x86DD)
		ip := make([]byte, 40)
		ip[0], ip[6], ip[7] = 0x60, proto, 64
		copy(ip[8:], s.AsSlice())
		copy(ip[24:], d.AsSlice())
		b = append(b, ip...)
	}
	l4 := make([]byte, 8)
	binary.BigEndian.PutUint16(l4, sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	return append(b, l4...)
}

func arpFrame(sender, target string) []byte {
	b := make([]byte, 14+28)
	binary.BigEndian.PutUint16(b[12:], 0x0806)
	copy(b[14+14:], netip.MustParseAddr(sender).AsSlice())
	copy(b[14+24:], netip.MustParseAddr(target).AsSlice())
	return b
}

func TestFilter(t *testing.T) {
	a := netip.MustParseAddr
	tcp := frame("192.168.1.10", "93.184.216.34", 6, 51000, 443, 0)
	udp := frame("192.168.1.10", "192.168.1.1", 17, 40000, 53, 0)
	icmp := frame("10.0.0.1", "10.0.0.2", 1, 0x0800, 0, 0)
	frag := frame("192.168.1.10", "192.168.1.1", 17, 53, 53, 100) // a later fragment: no ports
	tcp6 := frame("fd00::10", "2001:db8::1", 6, 50000, 443, 0)
	udp6 := frame("fd00::10", "fd00::1", 17, 5353, 53, 0)
	arp := arpFrame("192.168.1.10", "192.168.1.1")
	frames := map[string][]byte{"tcp": tcp, "udp": udp, "icmp": icmp, "frag": frag, "tcp6": tcp6, "udp6": udp6, "arp": arp}
	for _, tc := range []struct {
		name string
		f    Filter
		want []string // the frames that pass
	}{
		{"none", Filter{}, []string{"arp", "frag", "icmp", "tcp", "tcp6", "udp", "udp6"}},
		{"tcp", Filter{Proto: "tcp"}, []string{"tcp", "tcp6"}},
		{"udp", Filter{Proto: "udp"}, []string{"frag", "udp", "udp6"}},
		{"icmp", Filter{Proto: "icmp"}, []string{"icmp"}},
		{"arp", Filter{Proto: "arp"}, []string{"arp"}},
		{"arp host", Filter{Proto: "arp", Host: a("192.168.1.1")}, []string{"arp"}},
		{"arp other host", Filter{Proto: "arp", Host: a("192.168.1.99")}, nil},
		{"port 53", Filter{Port: 53}, []string{"udp", "udp6"}},
		{"port 443", Filter{Port: 443}, []string{"tcp", "tcp6"}},
		{"udp port 443", Filter{Proto: "udp", Port: 443}, nil},
		{"source port", Filter{Port: 51000}, []string{"tcp"}},
		{"host dst", Filter{Host: a("192.168.1.1")}, []string{"frag", "udp"}},
		{"host src", Filter{Host: a("192.168.1.10")}, []string{"frag", "tcp", "udp"}},
		{"host and port", Filter{Host: a("192.168.1.10"), Port: 443}, []string{"tcp"}},
		{"host and proto", Filter{Host: a("10.0.0.2"), Proto: "icmp"}, []string{"icmp"}},
		{"host6 dst", Filter{Host: a("2001:db8::1")}, []string{"tcp6"}},
		{"host6 src and port", Filter{Host: a("fd00::10"), Port: 53}, []string{"udp6"}},
		{"host6 no match", Filter{Host: a("fd00::99")}, nil},
		{"host6 shares a prefix", Filter{Host: a("fd00::1:0:0:10")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := tc.f.program(1000)
			if err != nil {
				t.Fatal(err)
			}
			prog, ok := bpf.Disassemble(raw)
			if !ok {
				t.Fatalf("program does not disassemble: %v", raw)
			}
			vm, err := bpf.NewVM(prog)
			if err != nil {
				t.Fatalf("%v\n%v", err, prog)
			}
			var got []string
			for _, name := range []string{"arp", "frag", "icmp", "tcp", "tcp6", "udp", "udp6"} {
				n, err := vm.Run(frames[name])
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if n != 0 {
					if n != 1000 { // the snap length the program returns
						t.Errorf("%s: kept %d bytes", name, n)
					}
					got = append(got, name)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("passed %v, want %v\n%v", got, tc.want, prog)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("passed %v, want %v\n%v", got, tc.want, prog)
				}
			}
		})
	}
}

func TestFilterErrors(t *testing.T) {
	for _, f := range []Filter{
		{Proto: "arp", Port: 53},
		{Proto: "arp", Host: netip.MustParseAddr("fd00::1")},
	} {
		if _, err := f.program(100); err == nil {
			t.Errorf("%+v: no error", f)
		}
	}
}
