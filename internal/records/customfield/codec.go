package customfield

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// encodeFast writes vals as encoding/json would (sorted keys, its string
// escaping), for the value types the checks store; ok is false for any
// other, which the caller then leaves to encoding/json.
func encodeFast(vals Values) ([]byte, bool) {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 0, 32*len(vals))
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		switch v := vals[k].(type) {
		case string:
			b = appendString(b, v)
		case json.Number:
			if !validNumber(string(v)) {
				return nil, false
			}
			b = append(b, v...)
		case bool:
			b = strconv.AppendBool(b, v)
		case []string:
			b = append(b, '[')
			for j, x := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendString(b, x)
			}
			b = append(b, ']')
		default:
			return nil, false
		}
	}
	return append(b, '}'), true
}

// validNumber reports whether s is a JSON number, as json.Number's
// encoding checks.
func validNumber(s string) bool {
	return json.Valid([]byte(s)) && s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9'))
}

// appendString appends s as encoding/json writes a string with HTML
// escaping on (its default): ", \, controls, <, >, &, U+2028, U+2029 and
// invalid UTF-8 (as U+FFFD) escaped.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeFast reads a stored object of strings, numbers, booleans and
// lists of strings; ok is false for anything else (a null, a nested
// object, a list of other values, bad JSON), which Decode then leaves to
// encoding/json.
func decodeFast(b []byte) (Values, bool) {
	p := parser{b: b}
	p.space()
	if !p.eat('{') {
		return nil, false
	}
	out := Values{}
	p.space()
	if p.eat('}') {
		return out, p.end()
	}
	for {
		p.space()
		k, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if !p.eat(':') {
			return nil, false
		}
		p.space()
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		out[k] = v
		p.space()
		if p.eat(',') {
			continue
		}
		if p.eat('}') {
			return out, p.end()
		}
		return nil, false
	}
}

type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\n' || p.b[p.i] == '\t' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// str reads a string; one with an escape goes through encoding/json, so
// that its unescaping is exactly JSON's.
func (p *parser) str() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start := p.i
	escaped := false
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '\\':
			escaped = true
			p.i += 2
			continue
		case c == '"':
			raw := p.b[start:p.i]
			p.i++
			if !escaped {
				if !utf8.Valid(raw) {
					return "", false
				}
				return string(raw), true
			}
			var s string
			if err := json.Unmarshal(p.b[start-1:p.i], &s); err != nil {
				return "", false
			}
			return s, true
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *parser) value() (any, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.str()
	case c == 't' || c == 'f':
		for _, w := range []string{"true", "false"} {
			if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
				p.i += len(w)
				return w == "true", true
			}
		}
		return nil, false
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		for p.i < len(p.b) && (p.b[p.i] == '-' || p.b[p.i] == '+' || p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E' || (p.b[p.i] >= '0' && p.b[p.i] <= '9')) {
			p.i++
		}
		n := string(p.b[start:p.i])
		if !validNumber(n) {
			return nil, false
		}
		return json.Number(n), true
	case c == '[':
		p.i++
		list := []any{}
		p.space()
		if p.eat(']') {
			return list, true
		}
		for {
			p.space()
			s, ok := p.str()
			if !ok {
				return nil, false
			}
			list = append(list, s)
			p.space()
			if p.eat(',') {
				continue
			}
			if p.eat(']') {
				return list, true
			}
			return nil, false
		}
	}
	return nil, false
}
