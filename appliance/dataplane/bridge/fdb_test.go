package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const sec = int64(time.Second)

func mac(i int) [6]byte { return [6]byte{0x02, 0, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)} }

func newFDB(t testing.TB, o Options) *FDB {
	t.Helper()
	f, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	return f
}

func TestLearnLookup(t *testing.T) {
	type step struct {
		op   string // learn, lookup, static, delete, sweep
		mac  int
		vid  uint16
		port Port
		at   int64 // seconds
		// want
		learn LearnResult
		found bool
		wport Port
		swept int
		errIs error
	}
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{"learn then lookup", Options{}, []step{
			{op: "lookup", mac: 1, at: 0, found: false},
			{op: "learn", mac: 1, port: 2, at: 0, learn: Learned},
			{op: "lookup", mac: 1, at: 1, found: true, wport: 2},
			{op: "learn", mac: 1, port: 2, at: 0, learn: Known},
		}},
		{"refresh after a second", Options{}, []step{
			{op: "learn", mac: 1, port: 2, at: 0, learn: Learned},
			{op: "learn", mac: 1, port: 2, at: 2, learn: Refreshed},
			{op: "learn", mac: 1, port: 2, at: 2, learn: Known},
		}},
		{"move to a new port", Options{}, []step{
			{op: "learn", mac: 1, port: 2, at: 0, learn: Learned},
			{op: "learn", mac: 1, port: 3, at: 0, learn: Moved},
			{op: "lookup", mac: 1, at: 0, found: true, wport: 3},
		}},
		{"vlans are independent", Options{}, []step{
			{op: "learn", mac: 1, vid: 10, port: 2, learn: Learned},
			{op: "learn", mac: 1, vid: 20, port: 3, learn: Learned},
			{op: "lookup", mac: 1, vid: 10, found: true, wport: 2},
			{op: "lookup", mac: 1, vid: 20, found: true, wport: 3},
			{op: "lookup", mac: 1, vid: 0, found: false},
		}},
		{"shared vlan learning", Options{SharedVLAN: true}, []step{
			{op: "learn", mac: 1, vid: 10, port: 2, learn: Learned},
			{op: "learn", mac: 1, vid: 20, port: 3, learn: Moved},
			{op: "lookup", mac: 1, vid: 0, found: true, wport: 3},
		}},
		{"aging", Options{AgingTime: 10 * time.Second}, []step{
			{op: "learn", mac: 1, port: 2, at: 0, learn: Learned},
			{op: "lookup", mac: 1, at: 10, found: true, wport: 2},
			{op: "lookup", mac: 1, at: 11, found: false},
			{op: "sweep", at: 11, swept: 1},
			{op: "learn", mac: 1, port: 3, at: 12, learn: Learned},
		}},
		{"refresh keeps an active station", Options{AgingTime: 10 * time.Second}, []step{
			{op: "learn", mac: 1, port: 2, at: 0, learn: Learned},
			{op: "learn", mac: 1, port: 2, at: 8, learn: Refreshed},
			{op: "lookup", mac: 1, at: 15, found: true, wport: 2},
			{op: "sweep", at: 15, swept: 0},
		}},
		{"an expired entry elsewhere is relearned, not moved", Options{AgingTime: 10 * time.Second}, []step{
			{op: "learn", mac: 1, port: 2, at: 0, learn: Learned},
			{op: "learn", mac: 1, port: 3, at: 20, learn: Learned},
		}},
		{"no aging", Options{AgingTime: -1}, []step{
			{op: "learn", mac: 1, port: 2, at: 0, learn: Learned},
			{op: "lookup", mac: 1, at: 1 << 30, found: true, wport: 2},
		}},
		{"static entries neither move nor age", Options{AgingTime: 10 * time.Second}, []step{
			{op: "static", mac: 1, port: 4},
			{op: "learn", mac: 1, port: 2, at: 0, learn: NotLearned},
			{op: "learn", mac: 1, port: 4, at: 0, learn: Known},
			{op: "lookup", mac: 1, at: 1000, found: true, wport: 4},
			{op: "sweep", at: 1000, swept: 0},
			{op: "delete", mac: 1, found: true},
			{op: "lookup", mac: 1, at: 1000, found: false},
			{op: "delete", mac: 1, found: false},
		}},
		{"static overrides a learned entry", Options{}, []step{
			{op: "learn", mac: 1, port: 2, learn: Learned},
			{op: "static", mac: 1, port: 3},
			{op: "lookup", mac: 1, found: true, wport: 3},
		}},
		{"group and zero addresses are not learned", Options{}, []step{
			{op: "learn", mac: -1, port: 2, learn: NotLearned},
			{op: "learn", mac: -2, port: 2, learn: NotLearned},
			{op: "learn", mac: 1, port: 0, learn: NotLearned},
			{op: "static", mac: -1, port: 2, errIs: ErrInvalidMAC},
			{op: "static", mac: 1, port: 0, errIs: ErrPort},
		}},
	}
	addr := func(i int) [6]byte {
		switch i {
		case -1:
			return [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		case -2:
			return [6]byte{}
		}
		return mac(i)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFDB(t, tt.opts)
			for i, s := range tt.steps {
				m := addr(s.mac)
				at := s.at * sec
				switch s.op {
				case "learn":
					if got := f.Learn(&m, s.vid, s.port, at); got != s.learn {
						t.Errorf("step %d: Learn(%d, vid %d, port %d, %ds) = %d, want %d", i, s.mac, s.vid, s.port, s.at, got, s.learn)
					}
				case "lookup":
					p, ok := f.Lookup(&m, s.vid, at)
					if ok != s.found || p != s.wport {
						t.Errorf("step %d: Lookup(%d, vid %d, %ds) = %d, %v, want %d, %v", i, s.mac, s.vid, s.at, p, ok, s.wport, s.found)
					}
				case "static":
					err := f.AddStatic(m, s.vid, s.port)
					if s.errIs == nil && err != nil || s.errIs != nil && !errors.Is(err, s.errIs) {
						t.Errorf("step %d: AddStatic = %v, want %v", i, err, s.errIs)
					}
				case "delete":
					if got := f.Delete(m, s.vid); got != s.found {
						t.Errorf("step %d: Delete = %v, want %v", i, got, s.found)
					}
				case "sweep":
					if got := f.Sweep(at); got != s.swept {
						t.Errorf("step %d: Sweep(%ds) = %d, want %d", i, s.at, got, s.swept)
					}
				}
			}
		})
	}
}

func TestStatsAndEntries(t *testing.T) {
	f := newFDB(t, Options{AgingTime: 100 * time.Second})
	m1, m2, m3 := mac(1), mac(2), mac(3)
	f.Learn(&m1, 0, 1, 0)
	f.Learn(&m2, 7, 2, 5*sec)
	f.Learn(&m2, 7, 3, 5*sec) // move
	if err := f.AddStatic(m3, 0, 4); err != nil {
		t.Fatal(err)
	}
	f.Learn(&m3, 0, 1, 0) // conflict
	got := f.Entries(nil, 10*sec)
	slices.SortFunc(got, func(a, b Entry) int { return slices.Compare(a.MAC[:], b.MAC[:]) })
	want := []Entry{
		{MAC: m1, Port: 1, Age: 10 * time.Second},
		{MAC: m2, VLAN: 7, Port: 3, Age: 5 * time.Second},
		{MAC: m3, Port: 4, Static: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Entries (-want +got):\n%s", diff)
	}
	wantStats := Stats{Entries: 3, Static: 1, Capacity: DefaultCapacity, Learned: 2, Moves: 1, Conflicts: 1}
	if diff := cmp.Diff(wantStats, f.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	if n := f.Flush(3, false); n != 1 {
		t.Errorf("Flush(3) = %d, want 1", n)
	}
	if n := f.Flush(0, false); n != 1 {
		t.Errorf("Flush(all dynamic) = %d, want 1", n)
	}
	if n := f.Len(); n != 1 {
		t.Errorf("Len after flushing dynamic entries = %d, want 1 (the static one)", n)
	}
	if n := f.Flush(0, true); n != 1 || f.Len() != 0 || f.Stats().Static != 0 {
		t.Errorf("Flush(all) = %d, Len %d, Static %d; want 1, 0, 0", n, f.Len(), f.Stats().Static)
	}
	b, err := json.Marshal(want[1])
	if err != nil {
		t.Fatal(err)
	}
	if w := `{"mac":"02:00:00:00:00:02","vlan":7,"port":3,"static":false,"age":5000000000}`; string(b) != w {
		t.Errorf("JSON = %s, want %s", b, w)
	}
}

func TestCapacity(t *testing.T) {
	for _, policy := range []FullPolicy{EvictOldest, Refuse} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			const capacity = 64
			f := newFDB(t, Options{Capacity: capacity, Full: policy, AgingTime: -1})
			learned := 0
			for i := range 1000 {
				m := mac(i)
				if f.Learn(&m, 0, 1, int64(i)*int64(time.Millisecond)) == Learned {
					learned++
				}
				if f.Len() > capacity {
					t.Fatalf("after %d MACs: Len %d > capacity %d", i+1, f.Len(), capacity)
				}
			}
			st := f.Stats()
			if st.Entries != capacity {
				t.Errorf("Entries = %d, want %d (full)", st.Entries, capacity)
			}
			switch policy {
			case EvictOldest:
				// Refusals happen only when the table is full and the
				// MAC's bucket has nothing to evict: rare.
				if st.Evicted == 0 || st.Refused >= st.Evicted {
					t.Errorf("evict: Evicted %d, Refused %d; want evictions to dominate", st.Evicted, st.Refused)
				}
			case Refuse:
				if st.Refused == 0 || st.Evicted != 0 || learned != capacity {
					t.Errorf("refuse: Refused %d, Evicted %d, learned %d; want >0, 0, %d", st.Refused, st.Evicted, learned, capacity)
				}
				// The first MACs stay.
				m := mac(0)
				if _, ok := f.Lookup(&m, 0, 0); !ok {
					t.Errorf("first MAC evicted under Refuse")
				}
			}
		})
	}
}

// TestMACFlood floods a full table with forged sources, each seen once,
// while stations that talk keep sending: under either policy no station
// loses its entry (so its frames are never flooded to the attacker), and
// under EvictOldest a station that arrives during the flood is learned.
func TestMACFlood(t *testing.T) {
	for _, policy := range []FullPolicy{EvictOldest, Refuse} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			const capacity, stations, flood = 1024, 200, 100000
			f := newFDB(t, Options{Capacity: capacity, Full: policy, AgingTime: time.Minute})
			now := int64(0)
			talk := func(i int) {
				m := mac(i)
				f.Learn(&m, 0, Port(1+i%3), now)
			}
			for i := range stations {
				talk(i)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			newcomer := stations + 1
			for n := range flood {
				now += int64(10 * time.Microsecond) // 100k forged frames/s
				m := [6]byte{0x02, 0xff, byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
				f.Learn(&m, 0, 4, now)
				if n%500 == 0 { // every station sends every 5 ms
					for i := range stations {
						talk(i)
					}
				}
				if n >= flood/2 && n%500 == 0 {
					talk(newcomer)
				}
			}
			for i := range stations {
				m := mac(i)
				if p, ok := f.Lookup(&m, 0, now); !ok || p != Port(1+i%3) {
					t.Fatalf("station %d after the flood: port %d, %v; want %d, true", i, p, ok, 1+i%3)
				}
			}
			st := f.Stats()
			if st.Entries != capacity {
				t.Errorf("Entries = %d, want %d (the flood fills the table)", st.Entries, capacity)
			}
			m := mac(newcomer)
			_, ok := f.Lookup(&m, 0, now)
			switch policy {
			case EvictOldest:
				if !ok || st.Evicted < flood/2 {
					t.Errorf("evict: newcomer learned %v, Evicted %d; want true, >= %d", ok, st.Evicted, flood/2)
				}
			case Refuse:
				if ok || st.Evicted != 0 {
					t.Errorf("refuse: newcomer learned %v, Evicted %d; want false, 0", ok, st.Evicted)
				}
			}
		})
	}
}

func TestStaticFullBucket(t *testing.T) {
	f := newFDB(t, Options{Capacity: 1})
	if err := f.AddStatic(mac(1), 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.AddStatic(mac(2), 0, 1); !errors.Is(err, ErrFull) {
		t.Errorf("second static in a table of one: %v, want ErrFull", err)
	}
	m := mac(3)
	if r := f.Learn(&m, 0, 2, 0); r != NotLearned {
		t.Errorf("learning into a table full of statics = %d, want NotLearned", r)
	}
}

func TestNewErrors(t *testing.T) {
	for _, o := range []Options{{Capacity: -1}, {Capacity: MaxCapacity + 1}, {Full: 7}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

// TestModel runs random operations against the FDB and a map model with
// a table big enough that nothing is evicted.
func TestModel(t *testing.T) {
	const aging = 50
	f := newFDB(t, Options{Capacity: 4096, AgingTime: aging * time.Millisecond})
	type ent struct {
		port   Port
		seen   int64
		static bool
	}
	model := map[[2]int]ent{}
	rng := rand.New(rand.NewPCG(1, 2))
	now := int64(0)
	for i := range 20000 {
		now += int64(rng.IntN(3)) * int64(time.Millisecond)
		nowMs := now / int64(time.Millisecond)
		mi, vid := rng.IntN(300), rng.IntN(3)
		m := mac(mi)
		k := [2]int{mi, vid}
		e, ok := model[k]
		live := ok && (e.static || nowMs-e.seen <= aging)
		switch op := rng.IntN(10); {
		case op < 6:
			p := Port(1 + rng.IntN(4))
			f.Learn(&m, uint16(vid), p, now)
			switch {
			case live && e.static:
			case live && e.port == p:
				// The FDB refreshes lazily (every aging/4 here).
				if nowMs-e.seen >= aging/4 {
					e.seen = nowMs
				}
				model[k] = e
			default:
				model[k] = ent{port: p, seen: nowMs}
			}
		case op < 9:
			p, found := f.Lookup(&m, uint16(vid), now)
			if found != live || live && p != e.port {
				t.Fatalf("op %d: Lookup(%d, %d) at %dms = %d, %v; model %+v live %v", i, mi, vid, nowMs, p, found, e, live)
			}
		default:
			if rng.IntN(2) == 0 {
				p := Port(1 + rng.IntN(4))
				if err := f.AddStatic(m, uint16(vid), p); err != nil {
					t.Fatal(err)
				}
				model[k] = ent{port: p, static: true}
			} else {
				f.Delete(m, uint16(vid))
				delete(model, k)
			}
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	f := newFDB(t, Options{})
	m1, m2 := mac(1), mac(2)
	f.Learn(&m1, 0, 1, 0)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		f.Learn(&m1, 0, 1, int64(i)*int64(time.Millisecond))
		m := mac(i)
		f.Learn(&m, 0, 2, 0)
		f.Lookup(&m2, 0, 0)
		f.Lookup(&m1, 0, 0)
	})
	if allocs != 0 {
		t.Errorf("Learn/Lookup allocate %v times per run", allocs)
	}
}

// TestFullBucketOfStations: in a full table, a new source whose bucket
// holds only active stations (and free slots) takes the place of an
// inactive entry of another bucket under EvictOldest, and is refused
// under Refuse; the stations stay.
func TestFullBucketOfStations(t *testing.T) {
	for _, policy := range []FullPolicy{EvictOldest, Refuse} {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			const capacity = 64
			f := newFDB(t, Options{Capacity: capacity, Full: policy, AgingTime: time.Minute})
			newcomer := mac(1000)
			own := f.bucket(f.key(&newcomer, 0))
			var stations [][6]byte
			for i := 0; f.Stats().Entries < capacity; i++ {
				m := mac(i)
				if f.bucket(f.key(&m, 0)) == own {
					if len(stations) == 2 {
						continue
					}
					stations = append(stations, m)
					f.Learn(&m, 0, 1, 0)
					f.Learn(&m, 0, 1, 0) // seen again: active
					continue
				}
				f.Learn(&m, 0, 2, 0) // seen once
			}
			before := f.Stats().Evicted
			res := f.Learn(&newcomer, 0, 3, int64(time.Millisecond))
			want, wantEvicted := Learned, before+1
			if policy == Refuse {
				want, wantEvicted = NotLearned, before
			}
			if st := f.Stats(); res != want || st.Evicted != wantEvicted || st.Entries != capacity {
				t.Errorf("Learn(newcomer) = %v, evicted %d → %d, %d entries; want %v, %d, %d", res, before, st.Evicted, st.Entries, want, wantEvicted, capacity)
			}
			for _, m := range stations {
				if _, ok := f.Lookup(&m, 0, int64(time.Millisecond)); !ok {
					t.Errorf("station %v lost", MAC(m))
				}
			}
		})
	}
}
