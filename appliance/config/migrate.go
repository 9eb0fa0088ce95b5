package config

import (
	"errors"
	"time"

	"e1kbox/rules"
)

// configV1 is schema version 1, the factory format of the first images:
//
//	{"version": 1, "mode": "bridge",
//	 "ports": [{"name": "port1", "interface": "eth1", "mtu": 1500, "enabled": true}],
//	 "fdbAgingSeconds": 300,
//	 "rules": "policy forward accept\n...",
//	 "dashboard": {"listen": ":8080"}}
//
// Version 1 had bridge mode only, ports without roles, addresses or
// VLANs, the FDB aging time in seconds and the rules in their text syntax.
type configV1 struct {
	Version         int      `json:"version"`
	Mode            string   `json:"mode"`
	Ports           []portV1 `json:"ports"`
	FDBAgingSeconds int      `json:"fdbAgingSeconds"`
	Rules           string   `json:"rules"`
	Dashboard       struct {
		Listen string `json:"listen"`
	} `json:"dashboard"`
}

type portV1 struct {
	Name      string `json:"name"`
	Interface string `json:"interface"`
	MTU       int    `json:"mtu"`
	Enabled   *bool  `json:"enabled"`
}

// migrate converts a version-1 config to the current schema. Errors name
// version-1 paths.
func (old *configV1) migrate() (*Config, error) {
	var e errs
	c := &Config{Version: Version, Mode: ModeBridge}
	switch old.Mode {
	case "", "bridge":
	default:
		e.add("mode", "version 1 has bridge mode only, got %q (write a version %d config for nat)", old.Mode, Version)
	}
	c.Ports = make([]Port, len(old.Ports))
	for i, p := range old.Ports {
		c.Ports[i] = Port{Name: p.Name, Interface: p.Interface, MTU: p.MTU, Enabled: p.Enabled}
	}
	switch {
	case old.FDBAgingSeconds < 0:
		e.add("fdbAgingSeconds", "negative (%d); want seconds, e.g. 300", old.FDBAgingSeconds)
	case old.FDBAgingSeconds > int(maxFDBAging/time.Second):
		e.add("fdbAgingSeconds", "%d is more than %d", old.FDBAgingSeconds, int(maxFDBAging/time.Second))
	default:
		c.Bridge.FDBAging = Duration(time.Duration(old.FDBAgingSeconds) * time.Second)
	}
	if old.Rules != "" {
		rs, err := rules.Parse(old.Rules)
		var list rules.ErrorList
		switch {
		case errors.As(err, &list):
			for _, re := range list {
				e.add("rules", "%v", re)
			}
		case err != nil:
			e.add("rules", "%v", err)
		default:
			// The config holds rules as JSON: text line numbers no
			// longer apply.
			for i := range rs.Rules {
				rs.Rules[i].Line = 0
			}
			c.Rules = *rs
		}
	}
	c.Dashboard.Listen = old.Dashboard.Listen
	if len(e.list) > 0 {
		return nil, e.list
	}
	return c, nil
}

// migrateV2 brings a version-2 config (decoded into Config: version 3
// only added fields) to version 3. Version 2 had no router services, so
// a migrated NAT router keeps running without them until they are turned
// on.
func (c *Config) migrateV2() {
	c.Version = Version
	if c.DHCP.Enabled == nil {
		c.DHCP.Enabled = ptr(false)
	}
	if c.DNS.Enabled == nil {
		c.DNS.Enabled = ptr(false)
	}
}
