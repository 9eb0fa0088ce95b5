package rules

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

type token struct {
	s      string
	col    int // 1-based, in characters
	quoted bool
	eol    bool // the end of the line, not a real token
}

// tokenize splits one line into words, quoted strings and the punctuation
// "& ( ) | , { } ==". A '#' outside a string starts a comment.
func tokenize(line int, text string) ([]token, *Error) {
	var toks []token
	col := 1
	i := 0
	errAt := func(col int, format string, args ...any) *Error {
		return &Error{Line: line, Col: col, Rule: -1, Msg: fmt.Sprintf(format, args...)}
	}
	for i < len(text) {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
			col++
		case c == '#':
			return toks, nil
		case c == '"':
			start := col
			var b strings.Builder
			i++
			col++
			for {
				if i >= len(text) {
					return nil, errAt(start, "unterminated string: add a closing '\"'")
				}
				r, n := utf8.DecodeRuneInString(text[i:])
				i += n
				col++
				if r == '"' {
					break
				}
				if r == '\\' {
					if i >= len(text) || (text[i] != '"' && text[i] != '\\') {
						return nil, errAt(col-1, "unknown escape in string: only \\\" and \\\\ are allowed")
					}
					r = rune(text[i])
					i++
					col++
				}
				b.WriteRune(r)
			}
			toks = append(toks, token{s: b.String(), col: start, quoted: true})
		case strings.IndexByte("&()|,{}", c) >= 0:
			toks = append(toks, token{s: text[i : i+1], col: col})
			i++
			col++
		case c == '=':
			if i+1 >= len(text) || text[i+1] != '=' {
				return nil, errAt(col, "want '==' here")
			}
			toks = append(toks, token{s: "==", col: col})
			i += 2
			col += 2
		case c == '!':
			return nil, errAt(col, "negation ('!=') is not supported")
		default:
			start, startCol := i, col
			for i < len(text) && strings.IndexByte(" \t\r#\"&()|,{}=!", text[i]) < 0 {
				_, n := utf8.DecodeRuneInString(text[i:])
				i += n
				col++
			}
			toks = append(toks, token{s: text[start:i], col: startCol})
		}
	}
	return toks, nil
}
