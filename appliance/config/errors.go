package config

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is one problem in a config, at the JSON path of the field
// ("ports[1].addresses[0]", "rules.rules[3].dport"; "" for the document
// itself).
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// Errors is every problem found in a config, in document order. It
// marshals to a JSON array of FieldError. Parse and Validate return it.
type Errors []FieldError

func (l Errors) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// AsErrors returns the field errors in err: the Errors it wraps, or one
// FieldError with an empty path for any other error, or nil for nil.
func AsErrors(err error) Errors {
	if err == nil {
		return nil
	}
	var l Errors
	if errors.As(err, &l) {
		return l
	}
	return Errors{{Message: err.Error()}}
}

// errs collects field errors.
type errs struct{ list Errors }

func (e *errs) add(path, format string, args ...any) {
	e.list = append(e.list, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (e *errs) err() error {
	if len(e.list) == 0 {
		return nil
	}
	return e.list
}

// join builds a JSON path: join("ports[1]", "mtu") = "ports[1].mtu".
func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
