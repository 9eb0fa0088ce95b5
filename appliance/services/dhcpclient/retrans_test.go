package dhcpclient

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBackoff: RFC 2131's 4, 8, 16, 32, 64, 64 … s.
func TestBackoff(t *testing.T) {
	b := Backoff{Base: 4 * time.Second, Max: 64 * time.Second}
	var got []time.Duration
	for n := range 8 {
		got = append(got, b.Wait(n)/time.Second)
	}
	if diff := cmp.Diff([]time.Duration{4, 8, 16, 32, 64, 64, 64, 64}, got); diff != "" {
		t.Errorf("waits in s (-want +got):\n%s", diff)
	}
}

// TestRetrans: RFC 8415 section 15's RT, with RAND at its ends and 0.
func TestRetrans(t *testing.T) {
	r := Retrans{IRT: time.Second, MRT: 30 * time.Second, MRC: 3}
	for _, tc := range []struct {
		rand float64
		want []time.Duration // RT of the first five transmissions
	}{
		{0, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}},
		{0.1, []time.Duration{1100 * time.Millisecond, 2310 * time.Millisecond, 4851 * time.Millisecond, 10187100 * time.Microsecond, 21392910 * time.Microsecond}},
		{-0.1, []time.Duration{900 * time.Millisecond, 1710 * time.Millisecond, 3249 * time.Millisecond, 6173100 * time.Microsecond, 11728890 * time.Microsecond}},
	} {
		var got []time.Duration
		rt := time.Duration(0)
		for range 5 {
			rt = r.Next(rt, tc.rand)
			got = append(got, rt)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("RAND %v: RT (-want +got):\n%s", tc.rand, diff)
		}
	}
	// Past MRT: MRT + RAND×MRT.
	if got, want := r.Next(20*time.Second, 0.1), 33*time.Second; got != want {
		t.Errorf("RT after 20 s = %v, want %v", got, want)
	}
	if r.Exhausted(2) || !r.Exhausted(3) || (Retrans{}).Exhausted(1000) {
		t.Error("Exhausted: want MRC 3 used up at 3 tries, MRC 0 never")
	}
}
