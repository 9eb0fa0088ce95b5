package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// decodeStrict decodes the JSON document data into v (a non-nil pointer)
// like encoding/json, but strictly and with every problem reported at its
// JSON path: unknown fields (names match exactly, not case-insensitively),
// duplicate fields, values of the wrong type and values a field's type
// rejects. Fields that decode are set even when others fail.
func decodeStrict(data []byte, v any) Errors {
	if err := checkSyntax(data); err != nil {
		return Errors{*err}
	}
	var e errs
	decodeValue(bytes.TrimSpace(data), reflect.ValueOf(v).Elem(), "", &e)
	return e.list
}

// checkSyntax reports a JSON syntax error with its line and column.
func checkSyntax(data []byte) *FieldError {
	if json.Valid(data) {
		return nil
	}
	err := json.Unmarshal(data, new(json.RawMessage))
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := position(data, se.Offset)
		return &FieldError{Message: fmt.Sprintf("invalid JSON at line %d, column %d: %s", line, col, strings.TrimPrefix(se.Error(), "json: "))}
	}
	return &FieldError{Message: "invalid JSON: " + fmt.Sprint(err)}
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	if col == 0 {
		col = 1
	}
	return line, col
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	prefixType      = reflect.TypeFor[netip.Prefix]()
	addrType        = reflect.TypeFor[netip.Addr]()
)

// decodeValue decodes raw (valid JSON) into v, which is addressable.
func decodeValue(raw []byte, v reflect.Value, path string, e *errs) {
	if string(raw) == "null" {
		v.SetZero()
		return
	}
	t := v.Type()
	if pt := reflect.PointerTo(t); pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler) {
		decodeLeaf(raw, v, path, e)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		decodeValue(raw, v.Elem(), path, e)
	case reflect.Struct:
		decodeStruct(raw, v, path, e)
	case reflect.Slice:
		decodeSlice(raw, v, path, e)
	case reflect.Map:
		decodeMap(raw, v, path, e)
	default:
		decodeLeaf(raw, v, path, e)
	}
}

func decodeLeaf(raw []byte, v reflect.Value, path string, e *errs) {
	err := json.Unmarshal(raw, v.Addr().Interface())
	if err == nil {
		return
	}
	t := v.Type()
	var ute *json.UnmarshalTypeError
	switch {
	case reflect.PointerTo(t).Implements(jsonUnmarshaler):
		e.add(path, "%s", err.Error())
	case errors.As(err, &ute):
		e.add(path, "want %s, got %s", describeType(t), ute.Value)
	case t == prefixType:
		e.add(path, "bad prefix %s: want an address with a prefix length like \"192.168.1.1/24\"", raw)
	case t == addrType:
		e.add(path, "bad address %s: want an IP address like \"192.168.1.1\"", raw)
	default:
		e.add(path, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// describeType names what JSON a value of type t takes, for messages.
func describeType(t reflect.Type) string {
	switch {
	case reflect.PointerTo(t).Implements(textUnmarshaler):
		return "a string"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if t.Bits() == 64 {
			return "an integer"
		}
		return fmt.Sprintf("an integer %d..%d", minInt(t.Bits()), maxInt(t.Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if t.Bits() == 64 {
			return "a non-negative integer"
		}
		return fmt.Sprintf("an integer 0..%d", maxUint(t.Bits()))
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return describeType(t.Elem())
	}
	return "a " + t.String()
}

func minInt(bits int) int64   { return -1 << (bits - 1) }
func maxInt(bits int) int64   { return 1<<(bits-1) - 1 }
func maxUint(bits int) uint64 { return 1<<bits - 1 }

// jsonKind names the kind of a JSON value for messages.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// members iterates over the members of a JSON object, in order.
func members(raw []byte, f func(key string, val []byte)) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return
		}
		f(tok.(string), val)
	}
}

func decodeStruct(raw []byte, v reflect.Value, path string, e *errs) {
	if raw[0] != '{' {
		e.add(path, "want an object, got %s", jsonKind(raw))
		return
	}
	fields := structFields(v.Type())
	seen := map[string]bool{}
	members(raw, func(key string, val []byte) {
		at := join(path, key)
		idx, ok := fields[key]
		switch {
		case !ok:
			e.add(at, "%s", unknownField(key, fields))
		case seen[key]:
			e.add(at, "duplicate field %q", key)
		default:
			seen[key] = true
			decodeValue(val, fieldByIndex(v, idx), at, e)
		}
	})
}

func unknownField(key string, fields map[string][]int) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		if strings.EqualFold(name, key) {
			return fmt.Sprintf("unknown field %q (did you mean %q?)", key, name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return fmt.Sprintf("unknown field %q (known fields: %s)", key, strings.Join(names, ", "))
}

// structFields maps the JSON names of t's fields (including those promoted
// from embedded structs) to their field index paths, by encoding/json's
// rules for names: tag name, else the Go name; "-" skips.
func structFields(t reflect.Type) map[string][]int {
	fields := map[string][]int{}
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(prefix), i)
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := fields[name]; !dup || len(idx) < len(fields[name]) {
				fields[name] = idx
			}
		}
	}
	walk(t, nil)
	return fields
}

func fieldByIndex(v reflect.Value, idx []int) reflect.Value {
	for _, i := range idx {
		v = v.Field(i)
	}
	return v
}

func decodeSlice(raw []byte, v reflect.Value, path string, e *errs) {
	if raw[0] != '[' {
		e.add(path, "want an array, got %s", jsonKind(raw))
		return
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		e.add(path, "%v", err)
		return
	}
	s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
	for i, el := range elems {
		decodeValue(el, s.Index(i), index(path, i), e)
	}
	v.Set(s)
}

func decodeMap(raw []byte, v reflect.Value, path string, e *errs) {
	if raw[0] != '{' {
		e.add(path, "want an object, got %s", jsonKind(raw))
		return
	}
	t := v.Type()
	m := reflect.MakeMap(t)
	seen := map[string]bool{}
	members(raw, func(key string, val []byte) {
		at := join(path, key)
		if seen[key] {
			e.add(at, "duplicate key %q", key)
			return
		}
		seen[key] = true
		k, err := mapKey(t.Key(), key)
		if err != nil {
			e.add(at, "%v", err)
			return
		}
		elem := reflect.New(t.Elem()).Elem()
		decodeValue(val, elem, at, e)
		m.SetMapIndex(k, elem)
	})
	v.Set(m)
}

// mapKey converts an object key to a map key of type kt, like
// encoding/json: TextUnmarshaler, string or integer kinds.
func mapKey(kt reflect.Type, key string) (reflect.Value, error) {
	if reflect.PointerTo(kt).Implements(textUnmarshaler) {
		k := reflect.New(kt)
		if err := k.Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(key)); err != nil {
			return reflect.Value{}, err
		}
		return k.Elem(), nil
	}
	switch kt.Kind() {
	case reflect.String:
		return reflect.ValueOf(key).Convert(kt), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(key, 10, kt.Bits())
		if err != nil {
			return reflect.Value{}, fmt.Errorf("bad key %q: want %s", key, describeType(kt))
		}
		return reflect.ValueOf(n).Convert(kt), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(key, 10, kt.Bits())
		if err != nil {
			return reflect.Value{}, fmt.Errorf("bad key %q: want %s", key, describeType(kt))
		}
		return reflect.ValueOf(n).Convert(kt), nil
	}
	return reflect.Value{}, fmt.Errorf("unsupported map key type %s", kt)
}
