package config

import (
	"errors"

	"e1kbox/rules"
)

// rules checks the packet filter by compiling it with the port names of
// the config; the rules package finds the problems, this maps them to
// their paths in the document.
func (v *validator) rules() {
	ids := map[string]uint16{}
	for _, name := range v.portNames() {
		ids[name] = uint16(len(ids))
	}
	_, err := rules.Compile(&v.c.Rules, rules.Options{Ports: ids})
	var list rules.ErrorList
	switch {
	case errors.As(err, &list):
		for _, re := range list {
			v.add(rulePath(re), "%s", re.Msg)
		}
	case err != nil:
		v.add("rules", "%v", err)
	}
}

// rulePath maps a rules error to its path in the config.
func rulePath(e *rules.Error) string {
	at := "rules"
	if e.Rule >= 0 {
		at = index("rules.rules", e.Rule)
	}
	if e.Field != "" {
		at = join(at, e.Field)
	}
	return at
}
