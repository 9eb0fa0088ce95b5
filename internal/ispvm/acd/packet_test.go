package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func tags(t ...tag) []tag { return t }

func TestReply(t *testing.T) {
	uniq := tag{Type: tagHostUniq, Value: []byte{1, 2, 3, 4}}
	relay := tag{Type: tagRelaySessionID, Value: []byte("r1")}
	max1500 := tag{Type: tagPPPMaxPayload, Value: []byte{0x05, 0xdc}}
	for _, tc := range []struct {
		name   string
		offer  offer
		req    packet
		sid    uint16
		want   packet
		wantOK bool
	}{
		{
			name:   "PADI any service, Host-Uniq and Relay-Session-Id echoed",
			offer:  offer{ACName: "isp", MaxPayload: 1492},
			req:    packet{Code: codePADI, Tags: tags(tag{Type: tagServiceName}, uniq, relay)},
			want:   packet{Code: codePADO, Tags: tags(tag{Type: tagACName, Value: []byte("isp")}, tag{Type: tagServiceName, Value: []byte{}}, uniq, relay)},
			wantOK: true,
		},
		{
			name:   "PADI asking the offered service",
			offer:  offer{ACName: "isp", Service: "inet", MaxPayload: 1492},
			req:    packet{Code: codePADI, Tags: tags(tag{Type: tagServiceName, Value: []byte("inet")})},
			want:   packet{Code: codePADO, Tags: tags(tag{Type: tagACName, Value: []byte("isp")}, tag{Type: tagServiceName, Value: []byte("inet")})},
			wantOK: true,
		},
		{
			name:   "PADI for any service gets the one offered",
			offer:  offer{ACName: "isp", Service: "inet", MaxPayload: 1492},
			req:    packet{Code: codePADI, Tags: tags(tag{Type: tagServiceName, Value: []byte{}})},
			want:   packet{Code: codePADO, Tags: tags(tag{Type: tagACName, Value: []byte("isp")}, tag{Type: tagServiceName, Value: []byte("inet")})},
			wantOK: true,
		},
		{
			name:   "PADI for another service",
			offer:  offer{ACName: "isp", Service: "inet", MaxPayload: 1492},
			req:    packet{Code: codePADI, Tags: tags(tag{Type: tagServiceName, Value: []byte("voip")})},
			want:   packet{Code: codePADO, Tags: tags(tag{Type: tagServiceNameErr, Value: []byte("voip")})},
			wantOK: false,
		},
		{
			name:   "PADR for another service: PADS with session 0",
			offer:  offer{ACName: "isp", Service: "inet", MaxPayload: 1492},
			req:    packet{Code: codePADR, Tags: tags(tag{Type: tagServiceName, Value: []byte("voip")}, uniq)},
			sid:    9,
			want:   packet{Code: codePADS, Tags: tags(tag{Type: tagServiceNameErr, Value: []byte("voip")}, uniq)},
			wantOK: false,
		},
		{
			name:   "RFC 4638 at 1500: PPP-Max-Payload echoed in PADS",
			offer:  offer{ACName: "isp", MaxPayload: 1500},
			req:    packet{Code: codePADR, Tags: tags(tag{Type: tagServiceName}, max1500, uniq)},
			sid:    7,
			want:   packet{Code: codePADS, Session: 7, Tags: tags(tag{Type: tagServiceName, Value: []byte{}}, uniq, max1500)},
			wantOK: true,
		},
		{
			name:   "RFC 4638 capped to the AC's 1496",
			offer:  offer{ACName: "isp", MaxPayload: 1496},
			req:    packet{Code: codePADI, Tags: tags(tag{Type: tagServiceName}, max1500)},
			want:   packet{Code: codePADO, Tags: tags(tag{Type: tagACName, Value: []byte("isp")}, tag{Type: tagServiceName, Value: []byte{}}, tag{Type: tagPPPMaxPayload, Value: []byte{0x05, 0xd8}})},
			wantOK: true,
		},
		{
			name:   "an AC at 1492 ignores PPP-Max-Payload",
			offer:  offer{ACName: "isp", MaxPayload: 1492},
			req:    packet{Code: codePADI, Tags: tags(tag{Type: tagServiceName}, max1500)},
			want:   packet{Code: codePADO, Tags: tags(tag{Type: tagACName, Value: []byte("isp")}, tag{Type: tagServiceName, Value: []byte{}})},
			wantOK: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.offer.reply(&tc.req, tc.sid)
			if ok != tc.wantOK {
				t.Errorf("ok %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(packet{}, tag{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
			// The reply survives a round trip through the wire format.
			back, err := parsePacket(got.marshal(nil))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got.marshal(nil), back.marshal(nil)); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePacket(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		want    packet
		wantErr bool
	}{
		{name: "PADI", in: []byte{0x11, 0x09, 0, 0, 0, 8, 0x01, 0x01, 0, 0, 0x01, 0x03, 0, 0},
			want: packet{Code: codePADI, Tags: tags(tag{Type: tagServiceName, Value: []byte{}}, tag{Type: tagHostUniq, Value: []byte{}})}},
		{name: "End-Of-List stops", in: []byte{0x11, 0xa7, 0x12, 0x34, 0, 8, 0, 0, 0, 0, 0x01, 0x01, 0, 0},
			want: packet{Code: codePADT, Session: 0x1234}},
		{name: "Ethernet padding ignored", in: []byte{0x11, 0xa7, 0, 1, 0, 0, 0xde, 0xad},
			want: packet{Code: codePADT, Session: 1}},
		{name: "short", in: []byte{0x11, 0x09, 0, 0}, wantErr: true},
		{name: "wrong version", in: []byte{0x21, 0x09, 0, 0, 0, 0}, wantErr: true},
		{name: "length beyond frame", in: []byte{0x11, 0x09, 0, 0, 0, 9, 0x01, 0x01, 0, 0}, wantErr: true},
		{name: "tag beyond payload", in: []byte{0x11, 0x09, 0, 0, 0, 6, 0x01, 0x01, 0, 4, 'a', 'b'}, wantErr: true},
		{name: "truncated tag header", in: []byte{0x11, 0x09, 0, 0, 0, 2, 0x01, 0x01}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePacket(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(packet{}, tag{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParsePacket: parsing never panics, and what parses marshals back to
// the bytes it came from (up to End-Of-List and padding).
func FuzzParsePacket(f *testing.F) {
	f.Add([]byte{0x11, 0x09, 0, 0, 0, 8, 0x01, 0x01, 0, 0, 0x01, 0x03, 0, 0})
	f.Add([]byte{0x11, 0x19, 0, 0, 0, 6, 0x01, 0x20, 0, 2, 0x05, 0xdc})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePacket(b)
		if err != nil {
			return
		}
		out := p.marshal(nil)
		again, err := parsePacket(out)
		if err != nil {
			t.Fatalf("re-parsing %x: %v", out, err)
		}
		if !bytes.Equal(again.marshal(nil), out) {
			t.Fatalf("marshal not stable: %x then %x", out, again.marshal(nil))
		}
	})
}

func TestPPPoEListed(t *testing.T) {
	proc := "Id       Address              Device\n00000100 52:54:00:15:50:02     eth0\n00000200 52:54:00:15:50:03   eth0.7\n"
	peer2 := [6]byte{0x52, 0x54, 0, 0x15, 0x50, 0x02}
	peer3 := [6]byte{0x52, 0x54, 0, 0x15, 0x50, 0x03}
	for _, tc := range []struct {
		id   uint16
		peer [6]byte
		want bool
	}{
		{1, peer2, true},
		{2, peer3, true},
		{2, peer2, false},
		{3, peer2, false},
	} {
		if got := pppoeListed(proc, tc.id, tc.peer); got != tc.want {
			t.Errorf("session %d with %s: listed %v, want %v", tc.id, mac(tc.peer), got, tc.want)
		}
	}
}
