package config

import (
	"strings"

	"e1kbox/tuning"
)

// TuningPlan returns the tuning plan to apply: Tuning, with every enabled
// data port's interface marked Data, and a tuning.DataPort plan (offloads
// off) added for enabled data ports that Tuning does not list.
func (c *Config) TuningPlan() tuning.Plan {
	p := c.Tuning
	p.Ports = append([]tuning.PortPlan(nil), c.Tuning.Ports...)
	for _, port := range c.Ports {
		if !port.IsEnabled() {
			continue
		}
		found := false
		for i := range p.Ports {
			if p.Ports[i].Name == port.Interface {
				p.Ports[i].Data = true
				found = true
			}
		}
		if !found {
			p.Ports = append(p.Ports, tuning.DataPort(port.Interface))
		}
	}
	return p
}

// tuning checks the tuning plan with the tuning package's validator,
// mapping its "path: message" errors to paths in the document, and that
// the interfaces it names exist.
func (v *validator) tuning() {
	for _, err := range leafErrors(v.c.Tuning.Validate()) {
		path, msg, ok := strings.Cut(err.Error(), ": ")
		if !ok || strings.ContainsAny(path, " \t\"") {
			v.add("tuning", "%v", err)
			continue
		}
		v.add("tuning."+path, "%s", msg)
	}
	host := ""
	if v.c.HostPort != nil {
		host = v.c.HostPort.Interface
		if host == "" {
			host = DefaultHostPortInterface
		}
	}
	for i, p := range v.c.Tuning.Ports {
		if p.Name != "" && p.Name != host && !v.known(p.Name) {
			v.add(index("tuning.ports", i)+".name", "unknown interface %q (this box has: %s)", p.Name, v.interfaceList())
		}
	}
}

// leafErrors flattens errors.Join trees.
func leafErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}
