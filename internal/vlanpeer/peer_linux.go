package vlanpeer

import (
	"testing"

	"e1kbox/internal/netnstest"
)

// In attaches a Peer to iface in ns for the test, which fails if it
// cannot; the test's cleanup detaches it.
func In(t testing.TB, ns *netnstest.Namespace, iface string, vid uint16, pcp uint8) *Peer {
	t.Helper()
	var p *Peer
	ns.Do(t, func() {
		var err error
		if p, err = Attach(iface, vid, pcp); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// Frames sums the frames seen whose key matches: the zero fields of want
// match anything, except Tagged, which must equal want's.
func (p *Peer) Frames(t testing.TB, want Key) uint64 {
	t.Helper()
	seen, err := p.Seen()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range seen {
		if c.Tagged == want.Tagged && match(c.PCP, want.PCP) && match(c.VID, want.VID) &&
			match(c.EtherType, want.EtherType) && match(c.Proto, want.Proto) && match(c.Port, want.Port) {
			n += c.Frames
		}
	}
	return n
}

func match[T comparable](got, want T) bool {
	var zero T
	return want == zero || got == want
}
