package dhcpclient

import (
	"testing"

	"golang.org/x/net/bpf"
)

// TestFilters: the programs as they were written out before udpFilter
// built them, and what the IPv6 one passes.
func TestFilters(t *testing.T) {
	want4 := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x0800, SkipTrue: 8},
		bpf.LoadAbsolute{Off: 14 + 9, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 17, SkipTrue: 6},
		bpf.LoadAbsolute{Off: 14 + 6, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 4},
		bpf.LoadMemShift{Off: 14},
		bpf.LoadIndirect{Off: 14 + 2, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 68, SkipFalse: 1},
		bpf.RetConstant{Val: 0x40000},
		bpf.RetConstant{Val: 0},
	}
	want6 := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0x86dd, SkipTrue: 5},
		bpf.LoadAbsolute{Off: 14 + 6, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 17, SkipTrue: 3},
		bpf.LoadAbsolute{Off: 14 + 40 + 2, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 546, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	}
	for _, tc := range []struct {
		name      string
		got, want []bpf.Instruction
	}{{"IPv4", FilterIPv4(68), want4}, {"IPv6", FilterIPv6(546), want6}} {
		if len(tc.got) != len(tc.want) {
			t.Fatalf("%s: %d instructions, want %d", tc.name, len(tc.got), len(tc.want))
		}
		for i := range tc.want {
			if tc.got[i] != tc.want[i] {
				t.Errorf("%s: instruction %d is %#v, want %#v", tc.name, i, tc.got[i], tc.want[i])
			}
		}
	}

	vm, err := bpf.NewVM(FilterIPv6(546))
	if err != nil {
		t.Fatal(err)
	}
	reply := (&Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: serverLL, DstIP: clientLL, SrcPort: 547, DstPort: 546, Payload: make([]byte, 40)}).Marshal()
	request := (&Frame{DstMAC: serverMAC, SrcMAC: clientMAC, SrcIP: clientLL, DstIP: serverLL, SrcPort: 546, DstPort: 547, Payload: make([]byte, 40)}).Marshal()
	v4 := (&Frame{DstMAC: clientMAC, SrcMAC: serverMAC, SrcIP: serverIP, DstIP: leaseIP, SrcPort: 547, DstPort: 546, Payload: make([]byte, 40)}).Marshal()
	tcp := append([]byte(nil), reply...)
	tcp[ethLen+6] = 6
	for _, tc := range []struct {
		name  string
		frame []byte
		pass  bool
	}{{"DHCPv6 reply", reply, true}, {"DHCPv6 request", request, false}, {"IPv4", v4, false}, {"TCP", tcp, false}} {
		n, err := vm.Run(tc.frame)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := n > 0; got != tc.pass || (got && n < len(tc.frame)) {
			t.Errorf("%s: filter passes %d bytes of %d, want pass %v", tc.name, n, len(tc.frame), tc.pass)
		}
	}
}
