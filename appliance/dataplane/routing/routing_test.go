package routing

import (
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestActionString(t *testing.T) {
	for _, tc := range []struct {
		a    Action
		want string
	}{
		{Drop, "drop"}, {Forward, "forward"}, {Reply, "reply"}, {Queued, "queued"},
		{Consumed, "consumed"}, {ToHost, "to_host"}, {Deliver, "deliver"}, {NumActions, "action(7)"},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("Action(%d).String() = %q, want %q", tc.a, got, tc.want)
		}
	}
}

// TestProbes: a probe is queued once however often it is asked for, at
// most MaxProbes wait, and Take empties the queue.
func TestProbes(t *testing.T) {
	var p Probes[int]
	if got := p.Take(nil); got != nil {
		t.Errorf("Take of an empty queue = %v, want nil", got)
	}
	for _, x := range []int{3, 1, 3, 2, 1} {
		p.Want(x)
	}
	if diff := cmp.Diff([]int{3, 1, 2}, p.Take(nil)); diff != "" {
		t.Errorf("Take (-want +got):\n%s", diff)
	}
	if got := p.Take(nil); got != nil {
		t.Errorf("Take after Take = %v, want nil", got)
	}
	for x := range MaxProbes + 10 {
		p.Want(x)
	}
	dst := []int{-1}
	if got := p.Take(dst); len(got) != 1+MaxProbes || got[0] != -1 || got[MaxProbes] != MaxProbes-1 {
		t.Errorf("Take after %d wants: %d probes after dst's, last %d; want %d, last %d", MaxProbes+10, len(got)-1, got[len(got)-1], MaxProbes, MaxProbes-1)
	}
}

func TestProbesAllocs(t *testing.T) {
	var p Probes[uint64]
	dst := make([]uint64, 0, MaxProbes)
	p.Want(1) // the queue's one allocation
	p.Take(dst)
	if n := testing.AllocsPerRun(100, func() {
		p.Want(7)
		p.Want(8)
		dst = p.Take(dst[:0])
	}); n != 0 {
		t.Errorf("%v allocations per Want and Take, want 0", n)
	}
}

func TestAddCounts(t *testing.T) {
	var src [3]atomic.Uint64
	src[0].Store(1)
	src[2].Store(5)
	dst := [3]uint64{10, 20, 30}
	AddCounts(dst[:], src[:])
	if want := [3]uint64{11, 20, 35}; dst != want {
		t.Errorf("AddCounts = %v, want %v", dst, want)
	}
}
