package config

import "testing"

func TestSecretVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		id   uint64
		isOK bool
	}{
		{VersionSecret(1), 1, true},
		{VersionSecret(18446744073709551615), 18446744073709551615, true},
		{"(the password of version 0)", 0, false},
		{"(the password of version 012)", 0, false},
		{"(the password of version +1)", 0, false},
		{"(the password of version )", 0, false},
		{"(the password of version 1", 0, false},
		{"(the password of version 18446744073709551616)", 0, false},
		{RedactedSecret, 0, false},
		{"hunter2", 0, false},
	} {
		id, ok := SecretVersion(tc.in)
		if id != tc.id || ok != tc.isOK {
			t.Errorf("SecretVersion(%q) = %d, %v; want %d, %v", tc.in, id, ok, tc.id, tc.isOK)
		}
	}
}
