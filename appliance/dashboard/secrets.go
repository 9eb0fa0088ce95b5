package dashboard

import (
	"bytes"
	"encoding/json"

	"e1kbox/appliance/config"
)

// secretPath is where the config holds a secret the API never shows: the
// PPPoE password.
var secretPath = []string{"nat", "wan", "pppoe", "password"}

// redact replaces the secrets in the config document b by
// config.RedactedSecret. A document it cannot read is returned as it is
// unless it holds a secret (then nothing of it is shown).
func redact(b []byte) []byte {
	out, err := editAt(b, secretPath, func(v json.RawMessage) json.RawMessage {
		if bytes.Equal(bytes.TrimSpace(v), []byte(`""`)) {
			return v
		}
		r, _ := json.Marshal(config.RedactedSecret)
		return r
	})
	if err != nil {
		return []byte("null")
	}
	return out
}

// unredact puts the stored secrets of cur back where the document b
// carries config.RedactedSecret (a config edited from what the API
// showed); anything else is left as it is, for the store to check.
func unredact(b []byte, cur *config.Config) []byte {
	if cur == nil || cur.NAT.WAN.PPPoE == nil {
		return b
	}
	placeholder, _ := json.Marshal(config.RedactedSecret)
	out, err := editAt(b, secretPath, func(v json.RawMessage) json.RawMessage {
		if !bytes.Equal(bytes.TrimSpace(v), placeholder) {
			return v
		}
		r, _ := json.Marshal(cur.NAT.WAN.PPPoE.Password)
		return r
	})
	if err != nil {
		return b
	}
	return out
}

// editAt rewrites the value at path in the JSON document b with f; b
// is returned unchanged when the path is not there.
func editAt(b []byte, path []string, f func(json.RawMessage) json.RawMessage) ([]byte, error) {
	if len(path) == 0 {
		return f(b), nil
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return b, nil
	}
	if !bytes.Contains(b, []byte(`"`+path[len(path)-1]+`"`)) {
		return b, nil // fast: the key is nowhere, keep the document's form
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	v, ok := m[path[0]]
	if !ok {
		return b, nil
	}
	nv, err := editAt(v, path[1:], f)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(nv, v) {
		return b, nil
	}
	m[path[0]] = nv
	return json.Marshal(m)
}
