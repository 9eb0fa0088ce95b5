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
func redact(b []byte) []byte { return redactAs(b, config.RedactedSecret) }

// redactVersion replaces the secrets in version id of the config by
// config.VersionSecret(id): restored, the version gets its own back.
func redactVersion(b []byte, id uint64) []byte { return redactAs(b, config.VersionSecret(id)) }

func redactAs(b []byte, placeholder string) []byte {
	out, err := editAt(b, secretPath, func(v json.RawMessage) json.RawMessage {
		if bytes.Equal(bytes.TrimSpace(v), []byte(`""`)) {
			return v
		}
		r, _ := json.Marshal(placeholder)
		return r
	})
	if err != nil {
		return []byte("null")
	}
	return out
}

// unredact puts the stored secrets back where the document b carries a
// placeholder (a config edited from what the API showed): those of cur
// for config.RedactedSecret, those of the stored version (read by
// version) for config.VersionSecret; anything else, or a version no
// longer stored, is left as it is, for the store to check.
func unredact(b []byte, cur *config.Config, version func(id uint64) ([]byte, error)) []byte {
	out, err := editAt(b, secretPath, func(v json.RawMessage) json.RawMessage {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return v
		}
		var pw string
		if id, ok := config.SecretVersion(s); ok {
			pw, ok = versionSecret(version, id)
			if !ok {
				return v
			}
		} else if s == config.RedactedSecret && cur != nil && cur.NAT.WAN.PPPoE != nil {
			pw = cur.NAT.WAN.PPPoE.Password
		} else {
			return v
		}
		r, _ := json.Marshal(pw)
		return r
	})
	if err != nil {
		return b
	}
	return out
}

// versionSecret reads the secret stored in version id.
func versionSecret(version func(id uint64) ([]byte, error), id uint64) (string, bool) {
	if version == nil {
		return "", false
	}
	b, err := version(id)
	if err != nil {
		return "", false
	}
	var doc struct {
		NAT struct {
			WAN struct {
				PPPoE *struct {
					Password *string `json:"password"`
				} `json:"pppoe"`
			} `json:"wan"`
		} `json:"nat"`
	}
	if json.Unmarshal(b, &doc) != nil || doc.NAT.WAN.PPPoE == nil || doc.NAT.WAN.PPPoE.Password == nil {
		return "", false
	}
	return *doc.NAT.WAN.PPPoE.Password, true
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
