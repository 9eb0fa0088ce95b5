package bridge

import (
	"testing"
)

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in      string
		want    MAC
		wantErr bool
	}{
		{"02:00:5e:10:00:01", MAC{2, 0, 0x5e, 0x10, 0, 1}, false},
		{"FF-ff-FF-ff-FF-ff", MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false},
		{"02:00:5e:10:00", MAC{}, true},
		{"02:00:5e:10:00:0g", MAC{}, true},
		{"02:00:5e:10:00.01", MAC{}, true},
	}
	for _, tt := range tests {
		got, err := ParseMAC(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseMAC(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{"02:00:5e:10:00:01", "ff-ff-ff-ff-ff-ff", "", "zz:zz:zz:zz:zz:zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMAC(s)
		if err != nil {
			return
		}
		back, err := ParseMAC(m.String())
		if err != nil || back != m {
			t.Fatalf("round trip of %q: %v %v", s, back, err)
		}
	})
}
