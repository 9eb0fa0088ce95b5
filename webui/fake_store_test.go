package webui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"e1kbox/rules"
)

// fakeStore is an in-memory ConfigStore with commit-confirm.
type fakeStore struct {
	mu       sync.Mutex
	versions []fakeVersion // oldest first
	current  int
	pending  *PendingInfo
	prev     int
	timer    *time.Timer    // rolls the pending change back
	rolling  sync.WaitGroup // the timer's callback, when it runs
	states   map[PendingID]ApplyState
	n        int
	applies  int
}

type fakeVersion struct {
	v   Version
	cfg json.RawMessage
}

const factoryConfig = `{
  "version": 2,
  "mode": "nat",
  "ports": [
    {"name": "port1", "interface": "eth1", "role": "wan", "addresses": ["203.0.113.2/24"], "mtu": 1500, "enabled": true},
    {"name": "port2", "interface": "eth2", "role": "lan", "addresses": ["192.168.1.1/24"], "mtu": 1500, "enabled": true},
    {"name": "port3", "interface": "eth3", "role": "lan", "mtu": 1500, "enabled": false}
  ],
  "hostPort": {"name": "host", "interface": "e1khost0", "addresses": ["192.168.1.2/24"]},
  "nat": {"gateway": "203.0.113.1", "masqueradePorts": "1024-65535",
          "forwards": [{"proto": "tcp", "wanPorts": "443", "lanHost": "192.168.1.10", "comment": "web server"}]},
  "rules": {"policy": {"forward": "accept"},
            "rules": [{"chain": "forward", "l4proto": "tcp", "dport": "22", "counter": true, "action": "accept"},
                      {"chain": "forward", "saddr": "10.0.0.0/8", "counter": true, "action": "drop"},
                      {"chain": "input", "l4proto": "udp", "dport": "53", "action": "accept"}]},
  "dashboard": {"listen": ":8080", "confirmTimeout": "1m0s"}
}`

func newFakeStore() *fakeStore {
	return &fakeStore{
		versions: []fakeVersion{{Version{ID: "v1", Time: time.Now().Add(-time.Hour), Source: "factory"}, json.RawMessage(factoryConfig)}},
		states:   map[PendingID]ApplyState{},
		n:        1,
	}
}

func (s *fakeStore) Current() (json.RawMessage, Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.versions[s.current]
	return v.cfg, v.v
}

func (s *fakeStore) Version() Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[s.current].v
}

type fakeConfig struct {
	Mode  string `json:"mode"`
	Ports []struct {
		Name      string   `json:"name"`
		Interface string   `json:"interface"`
		Addresses []string `json:"addresses"`
	} `json:"ports"`
	Rules *json.RawMessage `json:"rules"`
}

func (s *fakeStore) Validate(b []byte) []FieldError {
	var c fakeConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return []FieldError{{Path: "", Message: err.Error()}}
	}
	var errs []FieldError
	if c.Mode != "bridge" && c.Mode != "nat" {
		errs = append(errs, FieldError{Path: "mode", Message: fmt.Sprintf("must be bridge or nat, not %q", c.Mode)})
	}
	ports := map[string]uint16{}
	for i, p := range c.Ports {
		if p.Name == "" {
			errs = append(errs, FieldError{Path: fmt.Sprintf("ports[%d].name", i), Message: "required"})
		}
		if p.Interface == "" {
			errs = append(errs, FieldError{Path: fmt.Sprintf("ports[%d].interface", i), Message: "required"})
		}
		for j, a := range p.Addresses {
			if _, err := netip.ParsePrefix(a); err != nil {
				errs = append(errs, FieldError{Path: fmt.Sprintf("ports[%d].addresses[%d]", i, j), Message: "want an address with its prefix length, like 192.168.1.1/24"})
			}
		}
		ports[p.Name] = uint16(i + 1)
	}
	if c.Rules != nil {
		var rs rules.Ruleset
		if err := json.Unmarshal(*c.Rules, &rs); err != nil {
			return append(errs, FieldError{Path: "rules", Message: err.Error()})
		}
		_, err := rules.Compile(&rs, rules.Options{Ports: ports})
		var list rules.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				path := "rules"
				if e.Rule >= 0 {
					path = fmt.Sprintf("rules.rules[%d]", e.Rule)
					if e.Field != "" {
						path += "." + e.Field
					}
				}
				errs = append(errs, FieldError{Path: path, Message: e.Msg})
			}
		} else if err != nil {
			errs = append(errs, FieldError{Path: "rules", Message: err.Error()})
		}
	}
	return errs
}

func (s *fakeStore) Apply(b []byte, timeout time.Duration) (PendingID, error) {
	if errs := s.Validate(b); len(errs) > 0 {
		return "", FieldErrors(errs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending != nil {
		return "", ErrBusy
	}
	s.n++
	s.applies++
	v := Version{ID: "v" + strconv.Itoa(s.n), Time: time.Now(), Source: "web"}
	s.versions = append(s.versions, fakeVersion{v, append(json.RawMessage(nil), b...)})
	s.prev, s.current = s.current, len(s.versions)-1
	id := PendingID("change-" + strconv.Itoa(s.n))
	s.pending = &PendingInfo{ID: id, Version: v, Previous: s.versions[s.prev].v, Deadline: time.Now().Add(timeout)}
	s.states[id] = ApplyPending
	s.rolling.Add(1)
	s.timer = time.AfterFunc(timeout, func() {
		defer s.rolling.Done()
		s.Rollback(id)
	})
	return id, nil
}

// stopTimer stops the rollback timer; s.mu is held.
func (s *fakeStore) stopTimer() {
	if s.timer != nil && s.timer.Stop() {
		s.rolling.Done()
	}
}

// stop ends the rollback timer and waits for its callback if it runs.
func (s *fakeStore) stop() {
	s.mu.Lock()
	s.stopTimer()
	s.mu.Unlock()
	s.rolling.Wait()
}

func (s *fakeStore) Confirm(id PendingID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil || s.pending.ID != id {
		return fmt.Errorf("change %s: %w", id, ErrNotFound)
	}
	s.stopTimer()
	s.pending = nil
	s.states[id] = ApplyConfirmed
	return nil
}

func (s *fakeStore) Rollback(id PendingID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil || s.pending.ID != id {
		return fmt.Errorf("change %s: %w", id, ErrNotFound)
	}
	s.stopTimer()
	s.pending = nil
	s.current = s.prev
	s.states[id] = ApplyRolledBack
	return nil
}

func (s *fakeStore) Pending() *PendingInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		return nil
	}
	p := *s.pending
	return &p
}

func (s *fakeStore) State(id PendingID) ApplyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.states[id]; ok {
		return st
	}
	return ApplyUnknown
}

func (s *fakeStore) History() []Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Version
	for i := len(s.versions) - 1; i >= 0; i-- {
		out = append(out, s.versions[i].v)
	}
	return out
}

func (s *fakeStore) Get(id string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.versions {
		if v.v.ID == id {
			return v.cfg, nil
		}
	}
	return nil, fmt.Errorf("version %s: %w", id, ErrNotFound)
}
