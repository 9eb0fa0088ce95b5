package dhcp6c

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
)

// FuzzDecodeFrame: no frame crashes the decoder or the message parser and
// merge; an accepted payload lies inside the frame.
func FuzzDecodeFrame(f *testing.F) {
	iaid := [4]byte{0, 0, 0, 1}
	m := reply(iaid, time.Minute, 2*time.Minute,
		&dhcpv6.OptIAPrefix{Prefix: ipnet("2001:db8:100::/56"), PreferredLifetime: time.Hour, ValidLifetime: 2 * time.Hour})
	f.Add(replyFrame(m.ToBytes(), nil))
	f.Add(replyFrame([]byte{7}, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, why := decodeFrame(b, boxMAC, LinkLocal(boxMAC), false)
		if why != "" {
			return
		}
		if len(r.Payload) > len(b) || !bytes.Contains(b, r.Payload) {
			t.Fatalf("payload %x not inside the frame", r.Payload)
		}
		msg, err := dhcpv6.MessageFromBytes(r.Payload)
		if err != nil {
			return
		}
		l := merge(nil, msg, iaid, t0, t0)
		for _, p := range l.Prefixes {
			if !p.Prefix.Addr().IsGlobalUnicast() || p.Prefix.Bits() > 64 || p.Valid.Before(p.Preferred) {
				t.Fatalf("merged an unusable prefix %+v", p)
			}
		}
	})
}

// FuzzLeaseFile: no lease file crashes the decoder; one it accepts
// survives encoding and decoding again unchanged.
func FuzzLeaseFile(f *testing.F) {
	duid, _ := loadDUID("", boxMAC, t0)
	iaid := [4]byte{0, 0, 0, 1}
	l := &Lease{Prefixes: []Prefix{{netip.MustParsePrefix("2001:db8:100::/56"), t0, t0.Add(time.Hour)}},
		ServerID: []byte{0, 3, 0, 1, 2, 3, 4, 5, 6, 7}, Obtained: t0, T1: t0, T2: t0}
	b, _ := encodeLease(duid, iaid, l)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := decodeLease(data, duid, iaid)
		if err != nil {
			return
		}
		again, err := encodeLease(duid, iaid, l)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeLease(again, duid, iaid); err != nil {
			t.Fatalf("re-encoded lease does not decode: %v\n%s", err, again)
		}
	})
}
