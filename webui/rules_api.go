package webui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"e1kbox/rules"
)

// RulesEdit is the body of PUT /api/rules: the whole rule set in text form,
// one rule per entry, in priority order.
type RulesEdit struct {
	// Policies maps a chain to its default verdict (accept or drop).
	Policies map[string]string `json:"policies"`
	Rules    []RuleText        `json:"rules"`
}

// RuleText is one rule: its chain and its text (without the chain).
type RuleText struct {
	Chain string `json:"chain"`
	Text  string `json:"text"`
}

var chainNames = []string{"input", "forward", "output"}

// decodeRulesEdit reads a RulesEdit body strictly.
func decodeRulesEdit(b []byte) (RulesEdit, error) {
	var e RulesEdit
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return RulesEdit{}, fmt.Errorf("decoding rule edit: %w", err)
	}
	if dec.More() {
		return RulesEdit{}, errors.New("decoding rule edit: data after the JSON object")
	}
	return e, nil
}

// compileEdit turns an edit into a rule set. Errors name paths of the edit
// ("rules[2].text", "policies.forward").
func compileEdit(e RulesEdit) (*rules.Ruleset, []FieldError) {
	var errs []FieldError
	var src strings.Builder
	chains := slices.Sorted(func(yield func(string) bool) {
		for c := range e.Policies {
			if !yield(c) {
				return
			}
		}
	})
	policyLine := map[int]string{} // line -> chain
	line := 0
	for _, c := range chains {
		a := e.Policies[c]
		if !slices.Contains(chainNames, c) {
			errs = append(errs, FieldError{Path: "policies." + c, Message: "unknown chain (want input, forward or output)"})
			continue
		}
		if a != "accept" && a != "drop" {
			errs = append(errs, FieldError{Path: "policies." + c, Message: fmt.Sprintf("policy %q: want accept or drop", a)})
			continue
		}
		line++
		policyLine[line] = c
		fmt.Fprintf(&src, "policy %s %s\n", c, a)
	}
	ruleLine := map[int]int{} // line -> index in e.Rules
	var kept []int            // e.Rules indexes that made it into src, in order
	for i, r := range e.Rules {
		path := "rules[" + strconv.Itoa(i) + "]"
		chain := r.Chain
		if chain == "" {
			chain = "forward"
		}
		text := strings.TrimSpace(r.Text)
		first, _, _ := strings.Cut(text, " ")
		switch {
		case !slices.Contains(chainNames, chain):
			errs = append(errs, FieldError{Path: path + ".chain", Message: fmt.Sprintf("unknown chain %q (want input, forward or output)", r.Chain)})
			continue
		case text == "" || strings.HasPrefix(text, "#"):
			errs = append(errs, FieldError{Path: path + ".text", Message: "empty rule"})
			continue
		case strings.ContainsAny(text, "\r\n"):
			errs = append(errs, FieldError{Path: path + ".text", Message: "one rule per entry: no line breaks"})
			continue
		case first == "chain" || first == "policy":
			errs = append(errs, FieldError{Path: path + ".text", Message: "a rule, not a " + first + " line: set chains and policies in their own fields"})
			continue
		}
		fmt.Fprintf(&src, "chain %s\n", chain)
		line += 2
		ruleLine[line] = i
		kept = append(kept, i)
		src.WriteString(text)
		src.WriteByte('\n')
	}
	rs, err := rules.Parse(src.String())
	var list rules.ErrorList
	switch {
	case errors.As(err, &list):
		for _, pe := range list {
			errs = append(errs, ruleError(pe, policyLine, ruleLine, kept))
		}
	case err != nil:
		errs = append(errs, FieldError{Path: "rules", Message: err.Error()})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(rs.Rules) != len(e.Rules) {
		return nil, []FieldError{{Path: "rules", Message: fmt.Sprintf("%d rules given, %d parsed", len(e.Rules), len(rs.Rules))}}
	}
	return rs, nil
}

// ruleError names the edit field a parse error is about.
func ruleError(pe *rules.Error, policyLine map[int]string, ruleLine map[int]int, kept []int) FieldError {
	msg := pe.Msg
	if pe.Col > 0 {
		msg = fmt.Sprintf("column %d: %s", pe.Col, pe.Msg)
	}
	if pe.Field != "" && !strings.Contains(msg, pe.Field) {
		msg = pe.Field + ": " + msg
	}
	if c, ok := policyLine[pe.Line]; ok {
		return FieldError{Path: "policies." + c, Message: msg}
	}
	if i, ok := ruleLine[pe.Line]; ok {
		return FieldError{Path: "rules[" + strconv.Itoa(i) + "].text", Message: msg}
	}
	if pe.Line == 0 && pe.Rule >= 0 && pe.Rule < len(kept) {
		return FieldError{Path: "rules[" + strconv.Itoa(kept[pe.Rule]) + "].text", Message: msg}
	}
	return FieldError{Path: "rules", Message: pe.Error()}
}

// setKey replaces (or adds) a top-level member of a JSON object and keeps
// the other members and their order as they were.
func setKey(obj []byte, key string, val []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("reading config: not a JSON object")
	}
	kb, _ := json.Marshal(key)
	var out bytes.Buffer
	out.WriteByte('{')
	found := false
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("reading config: %w", err)
		}
		k, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("reading config member %q: %w", k, err)
		}
		if n > 0 {
			out.WriteByte(',')
		}
		n++
		name, _ := json.Marshal(k)
		out.Write(name)
		out.WriteByte(':')
		if k == key {
			found = true
			raw = val
		}
		out.Write(raw)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, errors.New("reading config: unterminated JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("reading config: data after the JSON object")
	}
	if !found {
		if n > 0 {
			out.WriteByte(',')
		}
		out.Write(kb)
		out.WriteByte(':')
		out.Write(val)
	}
	out.WriteByte('}')
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("writing config: %w", err)
	}
	return pretty.Bytes(), nil
}

var storeRulePath = regexp.MustCompile(`^\[?(\d+)\]?(?:\.(.+))?$`)

// mapRuleErrors renames the config store's errors about the rule set
// ("rules.rules[3].dport") to fields of the edit ("rules[3].text").
func mapRuleErrors(key string) func([]FieldError) []FieldError {
	return func(errs []FieldError) []FieldError {
		out := make([]FieldError, len(errs))
		for i, e := range errs {
			out[i] = e
			switch {
			case strings.HasPrefix(e.Path, key+".rules["):
				rest := strings.TrimPrefix(e.Path, key+".rules")
				m := storeRulePath.FindStringSubmatch(rest)
				if m == nil {
					continue
				}
				msg := e.Message
				if m[2] != "" {
					msg = m[2] + ": " + msg
				}
				out[i] = FieldError{Path: "rules[" + m[1] + "].text", Message: msg}
			case strings.HasPrefix(e.Path, key+".policy."):
				out[i] = FieldError{Path: "policies." + strings.TrimPrefix(e.Path, key+".policy."), Message: e.Message}
			case e.Path == key || strings.HasPrefix(e.Path, key+"."):
				out[i] = FieldError{Path: "rules", Message: e.Path + ": " + e.Message}
			}
		}
		return out
	}
}

// handlePutRules replaces the rule set through the config store (commit-
// confirm like any other change).
func (s *Server) handlePutRules(w http.ResponseWriter, r *http.Request) {
	cs, b, ok := s.configBody(w, r)
	if !ok {
		return
	}
	e, err := decodeRulesEdit(b)
	if err != nil {
		writeFieldErrors(w, []FieldError{{Path: "", Message: err.Error()}})
		return
	}
	rs, errs := compileEdit(e)
	if errs != nil {
		writeFieldErrors(w, errs)
		return
	}
	rj, err := json.Marshal(rs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding rule set: "+err.Error())
		return
	}
	cur, _ := cs.Current()
	cfg, err := setKey(cur, s.opts.RulesKey, rj)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.apply(w, r, cs, cfg, mapRuleErrors(s.opts.RulesKey))
}
