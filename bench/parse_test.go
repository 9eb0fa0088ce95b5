package main

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const procStat = `cpu  1000 20 300 5000 40 5 60 7 0 0
cpu0 600 10 200 2000 20 3 50 4 0 0
cpu1 400 10 100 3000 20 2 10 3 0 0
intr 123 0 0
ctxt 456
btime 1700000000
processes 789
procs_running 2
procs_blocked 0
softirq 1 2 3
`

func TestParseProcStat(t *testing.T) {
	st, err := ParseProcStat([]byte(procStat))
	if err != nil {
		t.Fatal(err)
	}
	want := ProcStat{
		All: CPUTimes{User: 1000, Nice: 20, System: 300, Idle: 5000, IOWait: 40, IRQ: 5, SoftIRQ: 60, Steal: 7},
		CPUs: map[int]CPUTimes{
			0: {User: 600, Nice: 10, System: 200, Idle: 2000, IOWait: 20, IRQ: 3, SoftIRQ: 50, Steal: 4},
			1: {User: 400, Nice: 10, System: 100, Idle: 3000, IOWait: 20, IRQ: 2, SoftIRQ: 10, Steal: 3},
		},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("ParseProcStat (-want +got):\n%s", diff)
	}
	if got, want := st.All.Busy(), uint64(1000+20+300+5+60+7); got != want {
		t.Errorf("Busy = %d, want %d", got, want)
	}
	if got, want := st.All.Total(), uint64(1392+5000+40); got != want {
		t.Errorf("Total = %d, want %d", got, want)
	}
}

func TestParseProcStatErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "no \"cpu\" line"},
		{"no aggregate", "cpu0 1 2 3 4\n", "no \"cpu\" line"},
		{"short", "cpu 1 2 3\n", "at least 5"},
		{"not a number", "cpu 1 2 x 4\n", "field 4"},
		{"bad cpu", "cpu 1 2 3 4\ncpux 1 2 3 4\n", "bad CPU"},
		{"dup cpu", "cpu 1 2 3 4\ncpu0 1 2 3 4\ncpu0 1 2 3 4\n", "twice"},
		{"dup aggregate", "cpu 1 2 3 4\ncpu 1 2 3 4\n", "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProcStat([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseProcStatOldKernel(t *testing.T) {
	st, err := ParseProcStat([]byte("cpu 1 2 3 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(CPUTimes{User: 1, Nice: 2, System: 3, Idle: 4}, st.All); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCPUTimesSub(t *testing.T) {
	a := CPUTimes{User: 10, Nice: 1, System: 5, Idle: 100, IOWait: 2, IRQ: 1, SoftIRQ: 8, Steal: 0}
	b := CPUTimes{User: 15, Nice: 1, System: 9, Idle: 150, IOWait: 2, IRQ: 2, SoftIRQ: 18, Steal: 1}
	want := CPUTimes{User: 5, System: 4, Idle: 50, IRQ: 1, SoftIRQ: 10, Steal: 1}
	if diff := cmp.Diff(want, b.Sub(a)); diff != "" {
		t.Errorf("Sub (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(CPUTimes{}, a.Sub(b)); diff != "" {
		t.Errorf("backwards Sub (-want +got):\n%s", diff)
	}
}

func TestParseProcStatLive(t *testing.T) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Skipf("no /proc/stat: %v", err)
	}
	st, err := ParseProcStat(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CPUs) == 0 || st.All.Total() == 0 {
		t.Errorf("parsed %+v from the live /proc/stat", st)
	}
}

const nftCounterJSON = `{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, ` +
	`{"counter": {"family": "netdev", "name": "other", "table": "sink", "handle": 3, "packets": 9, "bytes": 900}}, ` +
	`{"counter": {"family": "netdev", "name": "rx", "table": "sink", "handle": 2, "packets": 12345678901, "bytes": 76}}]}`

func TestParseNftCounter(t *testing.T) {
	p, b, err := ParseNftCounter([]byte(nftCounterJSON), "rx")
	if err != nil {
		t.Fatal(err)
	}
	if p != 12345678901 || b != 76 {
		t.Errorf("got packets %d bytes %d, want 12345678901 76", p, b)
	}
	p, _, err = ParseNftCounter([]byte(nftCounterJSON), "other")
	if err != nil || p != 9 {
		t.Errorf("other: %d, %v; want 9", p, err)
	}
}

func TestParseNftCounterErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not json", "table netdev sink {", "nft JSON"},
		{"missing", `{"nftables": [{"metainfo": {}}]}`, "no counter"},
		{"no packets", `{"nftables": [{"counter": {"name": "rx", "bytes": 1}}]}`, "no packets"},
		{"wrong type", `{"nftables": [{"counter": {"name": "rx", "packets": "many", "bytes": 1}}]}`, "counter"},
		{"negative", `{"nftables": [{"counter": {"name": "rx", "packets": -1, "bytes": 1}}]}`, "counter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseNftCounter([]byte(tc.in), "rx")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseIntList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"64,512", []int{64, 512}, ""},
		{" 64 , 1518 ", []int{64, 1518}, ""},
		{"1k,10K", []int{1000, 10000}, ""},
		{"", nil, ""},
		{"63", nil, "outside"},
		{"64,abc", nil, "not a number"},
		{"64,,512", nil, "not a number"},
		{"k", nil, "not a number"},
		{"9223372036854775807k", nil, "outside"},
		{"-9223372036854775807k", nil, "outside"},
	} {
		got, err := ParseIntList(tc.in, 64, 100000)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseIntList(%q) error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseIntList(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseIntList(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte(procStat))
	f.Add([]byte("cpu 1 2 3 4\n"))
	f.Add([]byte("cpu0 1 2 3 4\ncpu 1 1 1 1 1 1 1 1 1 1 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseProcStat(b)
		if err != nil {
			return
		}
		if st.CPUs == nil {
			t.Fatal("nil CPU map without an error")
		}
		for n := range st.CPUs {
			if n < 0 || n > 8191 {
				t.Fatalf("CPU number %d accepted", n)
			}
		}
		if d := st.All.Sub(st.All); d != (CPUTimes{}) {
			t.Fatalf("x-x = %+v", d)
		}
	})
}

func FuzzParseNftCounter(f *testing.F) {
	f.Add([]byte(nftCounterJSON), "rx")
	f.Add([]byte(`{"nftables": []}`), "rx")
	f.Add([]byte(`{"nftables": [{"counter": {"name": "", "packets": 0, "bytes": 0}}]}`), "")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		p, by, err := ParseNftCounter(b, name)
		if err != nil && (p != 0 || by != 0) {
			t.Fatalf("error %v with values %d %d", err, p, by)
		}
	})
}

func FuzzParseIntList(f *testing.F) {
	f.Add("64,512")
	f.Add("1k")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		xs, err := ParseIntList(s, 0, 1<<20)
		if err != nil {
			return
		}
		for _, x := range xs {
			if x < 0 || x > 1<<20 {
				t.Fatalf("ParseIntList(%q) = %v: %d out of range", s, xs, x)
			}
		}
	})
}

func TestBusyFromIdle(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    CPUTimes
		wall float64
		n    int
		want float64
	}{
		{"half idle", CPUTimes{Idle: 300}, 3, 2, 3}, // 6 CPU-s minus 3 s idle
		{"iowait is idle", CPUTimes{Idle: 200, IOWait: 100}, 3, 2, 3},
		{"ticks ignored", CPUTimes{User: 999, Idle: 300}, 3, 2, 3}, // busy fields do not count
		{"all idle", CPUTimes{Idle: 600}, 3, 2, 0},
		{"idle beyond wall", CPUTimes{Idle: 700}, 3, 2, 0},
		{"no idle", CPUTimes{}, 1.5, 1, 1.5},
	} {
		if got := BusyFromIdle(tc.d, tc.wall, tc.n); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: BusyFromIdle = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// interrupts is /proc/interrupts of a 2-CPU guest, shortened.
const interrupts = `           CPU0       CPU1       
 24:          2          0  IO-APIC   5-edge      ACPI:Ged
 26:          0          9  IO-APIC   4-edge      ttyS0
NMI:          0          0   Non-maskable interrupts
LOC:   26261098   24581850   Local timer interrupts
RES:    3049160    2885378   Rescheduling interrupts
CAL:   34592331   38620639   Function call interrupts
TLB:          0          0   TLB shootdowns
ERR:          7
MIS:          0
`

func TestParseInterrupts(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		cpu      int
		want     Interrupts
		err      bool
	}{
		{name: "cpu0", in: interrupts, cpu: 0, want: Interrupts{IPIs: 34592331, All: 2 + 26261098 + 3049160 + 34592331}},
		{name: "cpu1", in: interrupts, cpu: 1, want: Interrupts{IPIs: 38620639, All: 9 + 24581850 + 2885378 + 38620639}},
		{name: "no such CPU", in: interrupts, cpu: 2, err: true},
		{name: "empty", in: "", cpu: 0, err: true},
		{name: "short row", in: "  CPU0 CPU1\nCAL: 5\n", cpu: 1, err: true},
		{name: "bad count", in: "  CPU0\nCAL: x Function call interrupts\n", cpu: 0, err: true},
		{name: "CPU columns by name", in: "  CPU2 CPU5\nCAL: 1 2 Function call\n", cpu: 5, want: Interrupts{IPIs: 2, All: 2}},
	} {
		got, err := ParseInterrupts([]byte(tc.in), tc.cpu)
		if (err != nil) != tc.err {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestParseInterruptsLive parses this machine's /proc/interrupts.
func TestParseInterruptsLive(t *testing.T) {
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseInterrupts(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.All == 0 || got.All < got.IPIs {
		t.Errorf("CPU0: %+v, want some interrupts, IPIs among them", got)
	}
}

func FuzzParseInterrupts(f *testing.F) {
	f.Add([]byte(interrupts), 0)
	f.Add([]byte("CPU0\nCAL: 1\n"), 0)
	f.Fuzz(func(t *testing.T, b []byte, cpu int) {
		got, err := ParseInterrupts(b, cpu)
		if err != nil && got != (Interrupts{}) {
			t.Fatalf("error %v with %+v", err, got)
		}
		if err == nil && got.IPIs > got.All {
			t.Fatalf("IPIs %d > all %d", got.IPIs, got.All)
		}
	})
}
