package rules

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse reads a rule set in text form (see the package documentation).
// Each rule is checked as Validate would, except for port names, which
// only Compile knows. The error is an ErrorList whose entries read
// "line:col: message".
func Parse(src string) (*Ruleset, error) {
	rs := &Ruleset{Rules: []Rule{}}
	var errs ErrorList
	policyLine := map[Chain]int{}
	chain := Forward
	v := newValidator(0)
	for lineNo, text := range strings.Split(src, "\n") {
		lineNo++
		toks, err := tokenize(lineNo, text)
		if err != nil {
			errs = append(errs, err)
		} else if len(toks) > 0 {
			p := &lineParser{line: lineNo, toks: toks, end: utf8.RuneCountInString(text) + 1, rule: -1}
			switch toks[0].s {
			case "policy":
				err = p.policy(rs, policyLine)
			case "chain":
				chain, err = p.chain()
			default:
				p.rule = len(rs.Rules)
				p.r.Chain = chain
				p.r.Line = lineNo
				err = p.parseRule()
				if err == nil {
					err = p.check()
				}
				if err == nil {
					rs.Rules = append(rs.Rules, p.r)
					err = v.dup(rs, p.rule)
					if err != nil {
						err.Col = toks[0].col
					}
				}
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) >= maxErrors {
			break
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return rs, nil
}

// lineParser parses one line.
type lineParser struct {
	line int
	toks []token
	i    int
	end  int // column just past the end of the line
	rule int // index of the rule being parsed, -1 for other lines

	r   Rule
	pos [numFields]int // column where each field was given, 0 if not
}

func (p *lineParser) next() token {
	if p.i >= len(p.toks) {
		return token{col: p.end, eol: true}
	}
	t := p.toks[p.i]
	p.i++
	return t
}

func (p *lineParser) peek() token {
	if p.i >= len(p.toks) {
		return token{col: p.end, eol: true}
	}
	return p.toks[p.i]
}

func (p *lineParser) errAt(t token, format string, args ...any) *Error {
	return &Error{Line: p.line, Col: t.col, Rule: p.rule, Msg: fmt.Sprintf(format, args...)}
}

// word returns the next token, which must be a word; what names it in the
// error ("a port name").
func (p *lineParser) word(what string) (token, *Error) {
	t := p.next()
	switch {
	case t.eol:
		return t, p.errAt(t, "missing %s at end of line", what)
	case t.quoted || len(t.s) == 1 && strings.Contains("&()|,{}", t.s) || t.s == "==":
		return t, p.errAt(t, "want %s, found %s", what, describe(t))
	}
	return t, nil
}

func describe(t token) string {
	if t.eol {
		return "end of line"
	}
	if t.quoted {
		return strconv.Quote(t.s)
	}
	return "'" + t.s + "'"
}

// expectEOL reports tokens left after a complete line.
func (p *lineParser) expectEOL(after string) *Error {
	if t := p.next(); !t.eol {
		return p.errAt(t, "unexpected %s after %s", describe(t), after)
	}
	return nil
}

// value reads the next word, named what in errors, as a value of kind k.
func value[T any](p *lineParser, what string, k kind[T]) (T, *Error) {
	var zero T
	v, err := p.word(what)
	if err != nil {
		return zero, err
	}
	x, ok := k.parse(v.s)
	if !ok {
		return zero, p.errAt(v, k.bad, v.s)
	}
	return x, nil
}

// chainWord names the word after "policy" and "chain".
const chainWord = "a chain (input, forward or output)"

// policyKind is a chain's policy: accept or drop.
var policyKind = kind[Action]{parsePolicy, "unknown policy %q (want accept or drop)"}

func parsePolicy(s string) (Action, bool) {
	switch s {
	case "accept":
		return Accept, true
	case "drop":
		return Drop, true
	}
	return 0, false
}

func (p *lineParser) policy(rs *Ruleset, seen map[Chain]int) *Error {
	p.next()
	t := p.peek()
	c, err := value(p, chainWord, chainKind)
	if err != nil {
		return err
	}
	a, err := value(p, "a policy (accept or drop)", policyKind)
	if err != nil {
		return err
	}
	if first, dup := seen[c]; dup {
		return p.errAt(t, "policy for chain %s given twice (first on line %d)", c, first)
	}
	if err := p.expectEOL("the policy"); err != nil {
		return err
	}
	seen[c] = p.line
	if rs.Policy == nil {
		rs.Policy = map[Chain]Action{}
	}
	rs.Policy[c] = a
	return nil
}

func (p *lineParser) chain() (Chain, *Error) {
	p.next()
	c, err := value(p, chainWord, chainKind)
	if err != nil {
		return 0, err
	}
	return c, p.expectEOL("the chain name")
}

// set records that field f is given at token t; a field is given once.
func (p *lineParser) set(f field, t token, name string) *Error {
	if first := p.pos[f]; first != 0 {
		return p.errAt(t, "%s given twice (first at col %d)", name, first)
	}
	p.pos[f] = t.col
	return nil
}

// imply records value v of field f (the protocol, the ether type), which
// the keyword at token t names or implies; a rule has one. conflict is
// the error's format for another value: the new, the old and its column.
func imply[T comparable](p *lineParser, t token, f field, dst *T, v T, conflict string) *Error {
	var zero T
	switch *dst {
	case zero:
		*dst = v
		p.pos[f] = t.col
	case v:
	default:
		return p.errAt(t, conflict, v, *dst, p.pos[f])
	}
	return nil
}

// setProto records the L4 protocol implied or named at token t.
func (p *lineParser) setProto(t token, proto Proto) *Error {
	return imply(p, t, fProto, &p.r.Proto, proto, "%s conflicts with %s at col %d: a rule matches one protocol")
}

// setEther records the ether type implied or named at token t.
func (p *lineParser) setEther(t token, e EtherType) *Error {
	return imply(p, t, fEtherType, &p.r.EtherType, e, "ether type %s conflicts with %s at col %d")
}

// check runs the semantic checks on the parsed rule, pointing each error
// at the column of its field, and then drops words implied by others.
func (p *lineParser) check() *Error {
	if errs := checkRule(&p.r); len(errs) > 0 {
		fe := errs[0]
		col := p.pos[fe.f]
		if col == 0 {
			col = p.toks[0].col
		}
		return &Error{Line: p.line, Col: col, Rule: p.rule, Field: fieldJSON[fe.f], Msg: fe.msg}
	}
	if fam, _ := prefixFamily(&p.r.Match); fam != famAny && etherFamily(p.r.EtherType) == fam {
		p.r.EtherType = 0
	}
	return nil
}
