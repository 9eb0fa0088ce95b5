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

// TestUnresolved: entries count against the cap from their second of
// creation until Done, Move hands one's count to its replacement, and
// an entry stops counting Life seconds after it was made, without Done.
func TestUnresolved(t *testing.T) {
	u := NewUnresolved(3, 4)
	for _, step := range []struct {
		name string
		do   func() bool
		want bool
		live int // after the step, at its second
		at   uint32
	}{
		{"first", func() bool { return u.Add(100) }, true, 1, 100},
		{"second", func() bool { return u.Add(100) }, true, 2, 100},
		{"third, a second later", func() bool { return u.Add(101) }, true, 3, 101},
		{"fourth: over the cap", func() bool { return u.Add(101) }, false, 3, 101},
		{"one of the first done", func() bool { return u.Done(100) }, true, 2, 101},
		{"fourth again", func() bool { return u.Add(102) }, true, 3, 102},
		{"moved: the count stays", func() bool { return u.Move(100, 102) }, true, 3, 102},
		{"nothing left of second 100", func() bool { return u.Done(100) }, false, 3, 102},
		{"at 105 second 101's no longer counts", func() bool { return u.Add(105) }, true, 3, 105},
		{"over the cap again", func() bool { return u.Add(105) }, false, 3, 105},
		{"at 106 second 102's neither", func() bool { return u.Add(106) }, true, 2, 106},
		{"a move from an expired second is none", func() bool { return u.Move(101, 106) }, false, 2, 106},
	} {
		if got := step.do(); got != step.want {
			t.Errorf("%s: %v, want %v", step.name, got, step.want)
		}
		if got := u.Live(step.at); got != step.live {
			t.Errorf("%s: %d live at %d, want %d", step.name, got, step.at, step.live)
		}
	}
}
