package tuning

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    CPUSet
		format  string
		mask    string
		wantErr bool
	}{
		{in: "", want: CPUSet{}, format: "", mask: "0"},
		{in: "0", want: CPUSet{0}, format: "0", mask: "1"},
		{in: "1\n", want: CPUSet{1}, format: "1", mask: "2"},
		{in: "0-1", want: CPUSet{0, 1}, format: "0-1", mask: "3"},
		{in: "0,2-3,3,7", want: CPUSet{0, 2, 3, 7}, format: "0,2-3,7", mask: "8d"},
		{in: "31-33", want: CPUSet{31, 32, 33}, format: "31-33", mask: "3,80000000"},
		{in: "64", want: CPUSet{64}, format: "64", mask: "1,00000000,00000000"},
		{in: "3-1", wantErr: true},
		{in: "a", wantErr: true},
		{in: "1,", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "0-8192", wantErr: true},
		{in: "0-7:2/4", wantErr: true},
	} {
		got, err := ParseCPUList(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseCPUList(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseCPUList(%q) (-want +got):\n%s", tc.in, diff)
		}
		if s := got.String(); s != tc.format {
			t.Errorf("%v.String() = %q, want %q", got, s, tc.format)
		}
		if m := got.Mask(); m != tc.mask {
			t.Errorf("%v.Mask() = %q, want %q", got, m, tc.mask)
		}
		back, err := ParseCPUMask(tc.mask)
		if err != nil || !back.Equal(got) {
			t.Errorf("ParseCPUMask(%q) = %v, %v, want %v", tc.mask, back, err, got)
		}
	}
}

func TestParseCPUMask(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    CPUSet
		wantErr bool
	}{
		{in: "00000000,00000003\n", want: CPUSet{0, 1}},
		{in: "f", want: CPUSet{0, 1, 2, 3}},
		{in: "0", want: CPUSet{}},
		{in: "", wantErr: true},
		{in: "g", wantErr: true},
		{in: "1,,2", wantErr: true},
		{in: "123456789", wantErr: true},
		{in: "0x3", wantErr: true},
	} {
		got, err := ParseCPUMask(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseCPUMask(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && !got.Equal(tc.want) {
			t.Errorf("ParseCPUMask(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"", "0", "0-3,5", "1,3-4\n", "7-5", "0-8191", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseCPUList(s)
		if err != nil {
			return
		}
		if !slices.IsSorted(set) {
			t.Fatalf("ParseCPUList(%q) = %v, not sorted", s, set)
		}
		again, err := ParseCPUList(set.String())
		if err != nil || !again.Equal(set) {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, set, set.String(), again, err)
		}
		viaMask, err := ParseCPUMask(set.Mask())
		if err != nil || !viaMask.Equal(set) {
			t.Fatalf("mask round trip of %q: %q -> %v, %v", s, set.Mask(), viaMask, err)
		}
	})
}

func FuzzParseCPUMask(f *testing.F) {
	for _, s := range []string{"0", "3", "ff,00000001", "00000000,00000000,80000000", ",", "fffffffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseCPUMask(s)
		if err != nil {
			return
		}
		again, err := ParseCPUMask(set.Mask())
		if err != nil || !again.Equal(set) {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, set, set.Mask(), again, err)
		}
	})
}

func TestParseInterrupts(t *testing.T) {
	data, err := os.ReadFile("testdata/interrupts-e1000e-2cpu.txt")
	if err != nil {
		t.Fatal(err)
	}
	ints, err := ParseInterrupts(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(ints) != 16 {
		t.Errorf("got %d numbered interrupts, want 16", len(ints))
	}
	byIRQ := map[int]Interrupt{}
	for _, in := range ints {
		byIRQ[in.IRQ] = in
	}
	for _, want := range []Interrupt{
		{IRQ: 27, Counts: []uint64{1830, 17}, Chip: "PCI-MSIX-0000:00:04.0 0-edge", Names: []string{"eth1-rx-0"}},
		{IRQ: 28, Counts: []uint64{40, 2011}, Chip: "PCI-MSIX-0000:00:04.0 1-edge", Names: []string{"eth1-tx-0"}},
		{IRQ: 32, Counts: []uint64{2, 0}, Chip: "PCI-MSIX-0000:00:05.0 2-edge", Names: []string{"eth2"}},
		{IRQ: 10, Counts: []uint64{0, 0}, Chip: "IO-APIC 10-fasteoi", Names: []string{"uhci_hcd:usb1", "virtio-shared"}},
	} {
		if diff := cmp.Diff(want, byIRQ[want.IRQ]); diff != "" {
			t.Errorf("irq %d (-want +got):\n%s", want.IRQ, diff)
		}
	}

	// Older kernels: one chip token, no hwirq.
	old := "           CPU0       CPU1       CPU2       CPU3\n 45:  1  2  3  4   PCI-MSI-edge      eth0-rx-0\n 46:  0 0 0 0  PCI-MSI-edge eth0\n"
	ints, err = ParseInterrupts([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	want := []Interrupt{
		{IRQ: 45, Counts: []uint64{1, 2, 3, 4}, Chip: "PCI-MSI-edge", Names: []string{"eth0-rx-0"}},
		{IRQ: 46, Counts: []uint64{0, 0, 0, 0}, Chip: "PCI-MSI-edge", Names: []string{"eth0"}},
	}
	if diff := cmp.Diff(want, ints); diff != "" {
		t.Errorf("old format (-want +got):\n%s", diff)
	}

	for _, bad := range []string{
		"",
		"  \n",
		"CPU0 X\n",
		"  CPU0 CPU1\n 24: 1\n",
		"  CPU0\n 24: x IO-APIC 1-edge a\n",
	} {
		if _, err := ParseInterrupts([]byte(bad)); err == nil {
			t.Errorf("ParseInterrupts(%q) accepted", bad)
		}
	}
}

func FuzzParseInterrupts(f *testing.F) {
	data, err := os.ReadFile("testdata/interrupts-e1000e-2cpu.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("CPU0\n 1: 5 PCI-MSI-edge eth0\nNMI: 0\n"))
	f.Add([]byte("CPU0 CPU1\n 9: 1 2 IO-APIC 9-fasteoi a, b,c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ints, err := ParseInterrupts(data)
		if err != nil {
			return
		}
		header := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
		for _, in := range ints {
			if len(in.Counts) != len(header) {
				t.Fatalf("irq %d has %d counts for %d CPUs", in.IRQ, len(in.Counts), len(header))
			}
			for _, n := range in.Names {
				if n == "" || strings.Contains(n, ",") {
					t.Fatalf("irq %d: bad name %q", in.IRQ, n)
				}
			}
		}
	})
}

func TestParseKmsg(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    KmsgRecord
		wantErr bool
	}{
		{
			in: "3,1234,5678901,-;e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang:\\x0a  TDH                  <2b>\\x0a  TDT                  <2d>\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:19.0\n",
			want: KmsgRecord{Facility: 0, Level: 3, Seq: 1234, Usec: 5678901,
				Message: "e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang:\n  TDH                  <2b>\n  TDT                  <2d>"},
		},
		{
			in:   "14,7,100,-,caller=T1;back\\x5cslash \\xzz kept\n",
			want: KmsgRecord{Facility: 1, Level: 6, Seq: 7, Usec: 100, Message: `back\slash \xzz kept`},
		},
		{in: "6,1,2,-;", want: KmsgRecord{Level: 6, Seq: 1, Usec: 2}},
		{in: "no separator", wantErr: true},
		{in: "6,1,2;msg", wantErr: true},
		{in: "x,1,2,-;msg", wantErr: true},
		{in: "6,y,2,-;msg", wantErr: true},
		{in: "6,1,z,-;msg", wantErr: true},
	} {
		got, err := ParseKmsg([]byte(tc.in))
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseKmsg(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseKmsg(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func FuzzParseKmsg(f *testing.F) {
	f.Add([]byte("3,1234,5678901,-;e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang:\\x0a  TDH <2b>\n SUBSYSTEM=pci\n"))
	f.Add([]byte("6,1,2,-;\\x"))
	f.Add([]byte("6,1,2,-;a\\x4"))
	f.Fuzz(func(t *testing.T, rec []byte) {
		r, err := ParseKmsg(rec)
		if err != nil {
			return
		}
		if r.Level < 0 || r.Level > 7 {
			t.Fatalf("level %d", r.Level)
		}
		if len(r.Message) > len(rec) {
			t.Fatalf("message longer than the record")
		}
	})
}

func TestHangPort(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		port string
		ok   bool
	}{
		{"e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang:\n  TDH <2b>", "eth0", true},
		{"e1000e 0000:02:00.0 enp2s0: Detected Hardware Unit Hang:", "enp2s0", true},
		{"e1000 0000:02:00.0 eth1: Detected Tx Unit Hang", "", false},
		{"igb 0000:02:00.0 eth1: Detected Hardware Unit Hang:", "", false},
		{"e1000e 0000:00:19.0 eth0: Reset adapter unexpectedly", "", false},
		{"e1000e: Detected Hardware Unit Hang:", "", false},
		{"e1000e 0000:00:19.0 (unnamed net_device): Detected Hardware Unit Hang:", "", false},
		{"e1000e 0000:00:19.0 a/b: Detected Hardware Unit Hang:", "", false},
	} {
		port, ok := HangPort(tc.msg)
		if port != tc.port || ok != tc.ok {
			t.Errorf("HangPort(%q) = %q, %v; want %q, %v", tc.msg, port, ok, tc.port, tc.ok)
		}
	}
}

func FuzzHangPort(f *testing.F) {
	f.Add("e1000e 0000:00:19.0 eth0: Detected Hardware Unit Hang:\n  TDH <2b>")
	f.Add("e1000e x: Detected Hardware Unit Hang")
	f.Fuzz(func(t *testing.T, msg string) {
		port, ok := HangPort(msg)
		if ok && (!validIfname(port) || !strings.Contains(msg, port+": "+hangText)) {
			t.Fatalf("HangPort(%q) = %q", msg, port)
		}
	})
}

func TestParseKernelConfig(t *testing.T) {
	cfg, err := ParseKernelConfig([]byte("#\n# Automatically generated file\n#\nCONFIG_BRIDGE=y\n# CONFIG_BRIDGE_NETFILTER is not set\nCONFIG_LOCALVERSION=\"-gokrazy\"\nCONFIG_NR_CPUS=64\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"CONFIG_BRIDGE": "y", "CONFIG_BRIDGE_NETFILTER": "", "CONFIG_LOCALVERSION": "-gokrazy", "CONFIG_NR_CPUS": "64"}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ParseKernelConfig([]byte("BRIDGE=y\n")); err == nil {
		t.Errorf("accepted a line without CONFIG_")
	}
}

func FuzzParseKernelConfig(f *testing.F) {
	f.Add([]byte("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"x\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseKernelConfig(data)
		if err != nil {
			return
		}
		for k := range cfg {
			if !strings.HasPrefix(k, "CONFIG_") {
				t.Fatalf("key %q", k)
			}
		}
	})
}

func TestITRRxUsecs(t *testing.T) {
	for _, tc := range []struct {
		itr     ITR
		want    uint32
		wantErr bool
	}{
		{itr: ITROff, want: 0},
		{itr: ITRDynamic, want: 1},
		{itr: ITRConservative, want: 3},
		{itr: ITRSimplified, want: 4},
		{itr: "100", want: 10000},
		{itr: "101", want: 10000}, // 1e6/101 = 9901 µs, which e1000e keeps as 100 ints/s
		{itr: "20000", want: 50},
		{itr: "30000", want: 33},
		{itr: "100000", want: 10},
		{itr: "99", wantErr: true},
		{itr: "100001", wantErr: true},
		{itr: "0", wantErr: true},
		{itr: "4", wantErr: true},
		{itr: "", wantErr: true},
		{itr: "-5", wantErr: true},
		{itr: "Dynamic", wantErr: true},
		{itr: "1e4", wantErr: true},
	} {
		got, err := tc.itr.RxUsecs()
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ITR(%q).RxUsecs() = %d, %v; want %d, error %v", tc.itr, got, err, tc.want, tc.wantErr)
		}
	}
	// Every valid rate maps to an rx-usecs e1000e accepts and reads back unchanged.
	for n := MinITRRate; n <= MaxITRRate; n++ {
		u, err := ITR(strconv.Itoa(n)).RxUsecs()
		if err != nil || !validRxUsecs(u) || e1000eRxUsecsReadback(u) != u {
			t.Fatalf("rate %d: rx-usecs %d, %v (readback %d)", n, u, err, e1000eRxUsecsReadback(u))
		}
	}
}

func FuzzITRRxUsecs(f *testing.F) {
	for _, s := range []string{"off", "dynamic", "100", "100000", "2", "99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ITR(s).RxUsecs()
		if err == nil && !validRxUsecs(u) {
			t.Fatalf("ITR(%q) -> rx-usecs %d, which e1000e rejects", s, u)
		}
	})
}

func TestValidRxUsecs(t *testing.T) {
	var valid []uint32
	for u := range uint32(12) {
		if validRxUsecs(u) {
			valid = append(valid, u)
		}
	}
	if diff := cmp.Diff([]uint32{0, 1, 3, 4, 10, 11}, valid); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if validRxUsecs(10000) != true || validRxUsecs(10001) != false {
		t.Errorf("upper bound wrong")
	}
}

func FuzzRingWant(f *testing.F) {
	for _, s := range []string{"rx=1024,tx=256", "rx=100", "tx=4096", "rx=", "rx=64,rx=72"} {
		f.Add(s)
	}
	k := &ringKnob{}
	f.Fuzz(func(t *testing.T, s string) {
		w, _, err := k.parse(s)
		if err != nil {
			return
		}
		for _, n := range []uint32{w.rx, w.tx} {
			if n != 0 && (n < minRing || n > maxRing || n%8 != 0) {
				t.Fatalf("parse(%q) = %+v", s, w)
			}
		}
	})
}
