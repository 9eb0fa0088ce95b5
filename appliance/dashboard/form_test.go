package dashboard

import (
	"reflect"
	"strings"
	"testing"

	"e1kbox/appliance/config"
	"e1kbox/webui"
)

// TestConfigFormPaths: every field of the dashboard's config form names a
// member of the runtime config's JSON, so no input edits a member the
// box would refuse as unknown.
func TestConfigFormPaths(t *testing.T) {
	root := reflect.TypeFor[config.Config]()
	var check func(at string, typ reflect.Type, fields []webui.FormField)
	check = func(at string, typ reflect.Type, fields []webui.FormField) {
		for _, f := range fields {
			ft, ok := jsonMember(typ, f.Path)
			if !ok {
				t.Errorf("%s%s (%q): no such member of the config", at, f.Path, f.Label)
				continue
			}
			if f.Kind == "list" {
				for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
					ft = ft.Elem()
				}
				check(at+f.Path+"[].", ft, f.Item)
			}
		}
	}
	for _, s := range webui.DefaultConfigForm {
		check("", root, s.Fields)
	}
}

// jsonMember follows a dotted JSON path through struct fields (by their
// json names), pointers and maps, and returns the member's type.
func jsonMember(t reflect.Type, path string) (reflect.Type, bool) {
	for _, name := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		found := false
		for i := range t.NumField() {
			f := t.Field(i)
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
				t, found = f.Type, true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return t, true
}

func TestJSONMember(t *testing.T) {
	root := reflect.TypeFor[config.Config]()
	for _, tt := range []struct {
		path string
		ok   bool
	}{{"dashboard.internetProbe", true}, {"nat.conntrack.timeouts.udp", true}, {"dashboard.nope", false}, {"mode.x", false}} {
		if _, ok := jsonMember(root, tt.path); ok != tt.ok {
			t.Errorf("jsonMember(%q) = %v, want %v", tt.path, ok, tt.ok)
		}
	}
}
