package nat

import (
	"math/rand/v2"
	"testing"

	"e1kbox/appliance/dataplane/frame"
)

// TestMappingsChurn acquires and releases mappings at random in a small
// index (16 slots: long probe runs, wrap-around, shifts on every removal)
// and checks them against a model after every step: each live endpoint
// keeps its NAT port and is found, each released one is gone, and no NAT
// port serves two endpoints.
func TestMappingsChurn(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 0xdeadbeef} {
		m := newMappings(8, seed)
		s := &snapshot{portMin: 1024, portMax: 1031}
		p := m.class[classOf(frame.ProtoUDP)]
		type ep struct {
			ip   uint32
			port uint16
		}
		live := map[ep]uint16{} // endpoint → NAT port
		refs := map[ep]int{}
		rng := rand.New(rand.NewPCG(seed, 7))
		for step := range 20000 {
			e := ep{0xc0a80100 + uint32(rng.IntN(6)), uint16(1024 + rng.IntN(3))}
			if rng.IntN(2) == 0 {
				nat, ok := m.acquire(frame.ProtoUDP, e.ip, e.port, s)
				switch want, had := live[e]; {
				case had && (!ok || nat != want):
					t.Fatalf("seed %d step %d: acquire %v = %d, %v; want its mapping %d", seed, step, e, nat, ok, want)
				case !had && ok:
					for o, n := range live {
						if n == nat {
							t.Fatalf("seed %d step %d: acquire %v got NAT port %d, %v's", seed, step, e, nat, o)
						}
					}
					live[e] = nat
				}
				if ok {
					refs[e]++
				}
			} else if nat, ok := live[e]; ok {
				m.release(frame.ProtoUDP, nat)
				if refs[e]--; refs[e] == 0 {
					delete(live, e)
					delete(refs, e)
				}
			}
			for e := range refs {
				if _, _, found := p.lookup(e.ip, e.port); !found {
					t.Fatalf("seed %d step %d: live endpoint %v not found in the index", seed, step, e)
				}
			}
			if got := m.active(frame.ProtoUDP); got != len(live) {
				t.Fatalf("seed %d step %d: %d active mappings, want %d", seed, step, got, len(live))
			}
		}
	}
}

// TestAllocPicksAhead checks the free-list allocation that picks each
// slot one allocation ahead: every slot is handed out exactly once until
// the table is full, a released slot is handed out again, and the
// count follows.
func TestAllocPicksAhead(t *testing.T) {
	const n = 64
	tb := newTable(n, 1, nil)
	seen := map[uint32]bool{}
	for i := range n {
		idx, ok := tb.alloc()
		if !ok {
			t.Fatalf("alloc %d of %d failed", i, n)
		}
		if seen[idx] || idx >= n {
			t.Fatalf("alloc %d: slot %d handed out twice or out of range", i, idx)
		}
		seen[idx] = true
	}
	if idx, ok := tb.alloc(); ok {
		t.Fatalf("alloc on a full table gave slot %d", idx)
	}
	tb.release(5)
	tb.release(9)
	got := map[uint32]bool{}
	for range 2 {
		idx, ok := tb.alloc()
		if !ok {
			t.Fatal("alloc after a release failed")
		}
		got[idx] = true
	}
	if !got[5] || !got[9] {
		t.Errorf("after releasing 5 and 9, alloc gave %v", got)
	}
	if _, ok := tb.alloc(); ok {
		t.Error("alloc past the released slots succeeded")
	}
	if c := tb.count.Load(); c != n {
		t.Errorf("count %d, want %d", c, n)
	}
}
