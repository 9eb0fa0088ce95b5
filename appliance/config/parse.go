package config

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Parse decodes a config document of any supported version, migrates it
// to Version and fills in the defaults. Decoding is strict: unknown fields,
// duplicate fields and values of the wrong type are errors. The error is
// an Errors listing every problem with its JSON path. Parse does not check
// the config's meaning; call Validate for that.
func Parse(data []byte) (*Config, error) {
	if err := checkSyntax(data); err != nil {
		return nil, Errors{*err}
	}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, Errors{{Message: fmt.Sprintf("want a JSON object, got %s", jsonKind(bytes.TrimSpace(data)))}}
	}
	raw, ok := head["version"]
	if !ok {
		return nil, Errors{{Path: "version", Message: fmt.Sprintf("missing; want %d (this firmware reads versions 1 to %d)", Version, Version)}}
	}
	var version int
	if err := json.Unmarshal(raw, &version); err != nil {
		return nil, Errors{{Path: "version", Message: fmt.Sprintf("want an integer, got %s", raw)}}
	}
	var c *Config
	switch version {
	case 1:
		var old configV1
		if errs := decodeStrict(data, &old); errs != nil {
			return nil, errs
		}
		var err error
		if c, err = old.migrate(); err != nil {
			return nil, err
		}
	case 2:
		c = new(Config)
		if errs := decodeStrict(data, c); errs != nil {
			return nil, errs
		}
		c.migrateV2()
	case Version:
		c = new(Config)
		if errs := decodeStrict(data, c); errs != nil {
			return nil, errs
		}
	default:
		return nil, Errors{{Path: "version", Message: fmt.Sprintf("version %d is not supported; this firmware reads versions 1 to %d", version, Version)}}
	}
	c.ApplyDefaults()
	return c, nil
}

// Marshal encodes c as indented JSON with a final newline: the form
// stored on disk and returned by the API. Parse(Marshal(c)) gives c back.
func Marshal(c *Config) ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal config: %w", err)
	}
	return append(b, '\n'), nil
}

// Clone returns a deep copy of c (through Marshal and Parse; c must
// marshal, as every parsed or valid config does).
func (c *Config) Clone() (*Config, error) {
	b, err := Marshal(c)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}
