package jsonvalue

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The fast path for decoding JSON.
//
// Loading a long session is mostly decoding its messages' JSON, and
// encoding/json spends most of that in reflection and in scanning every
// body two or three times (validate, then decode, then decode the content
// and each tool call's arguments again). Parser decodes the forms skein
// writes (Encode here; sessions reads a message with Parser's exported
// methods) in one pass. It gives up with
// ErrSlow on anything it does not expect — a key it does not know or in
// another case, a repeated key, a null where it wants a string, invalid
// UTF-8, a lone surrogate escape, malformed JSON — and the callers then
// decode with encoding/json, so the result is always what encoding/json
// gives (FuzzFast here and sessions' FuzzFastMessage check it).

// ErrSlow is the Parser giving up: the caller decodes with encoding/json
// instead.
var ErrSlow = errors.New("jsonvalue: not on the fast JSON path")

// Parser reads one JSON text from b. depth counts the lists and objects
// open around the value being read: past MaxDepth, value gives up with
// ErrDeep. Its methods return ErrSlow (or ErrDeep) and nothing else.
type Parser struct {
	b     []byte
	i     int
	depth int
}

// NewParser returns a Parser reading data.
func NewParser(data []byte) *Parser { return &Parser{b: data} }

func (p *Parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// Peek returns the next byte after whitespace, or 0 at the end.
func (p *Parser) Peek() byte {
	p.space()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// expect consumes c after whitespace.
func (p *Parser) expect(c byte) error {
	if p.Peek() != c {
		return ErrSlow
	}
	p.i++
	return nil
}

// End checks that only whitespace follows.
func (p *Parser) End() error {
	if p.Peek() != 0 || p.i != len(p.b) {
		return ErrSlow
	}
	return nil
}

// Literal consumes the literal word (true, false, null).
func (p *Parser) Literal(word string) error {
	p.space()
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return ErrSlow
	}
	p.i += len(word)
	return nil
}

// rawKey reads an object key without escapes and the colon after it; the
// result aliases b.
func (p *Parser) rawKey() ([]byte, error) {
	if p.Peek() != '"' {
		return nil, ErrSlow
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], p.expect(':')
		case c == '\\' || c < 0x20:
			return nil, ErrSlow
		}
	}
	return nil, ErrSlow
}

// Object reads an object, calling field for each key with the Parser
// positioned at the value, which field must consume.
func (p *Parser) Object(field func(key []byte) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	if p.Peek() == '}' {
		p.i++
		return nil
	}
	for {
		key, err := p.rawKey()
		if err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch p.Peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return ErrSlow
		}
	}
}

// Array reads an array, calling elem with the Parser positioned at each
// element, which elem must consume.
func (p *Parser) Array(elem func() error) error {
	if err := p.expect('['); err != nil {
		return err
	}
	if p.Peek() == ']' {
		p.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch p.Peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return ErrSlow
		}
	}
}

// Str reads a string (not null).
func (p *Parser) Str() (string, error) {
	if p.Peek() != '"' {
		return "", ErrSlow
	}
	start := p.i + 1
	ascii := true
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return "", ErrSlow
			}
			p.i = j + 1
			return string(s), nil
		case c == '\\':
			return p.escapedStr(start)
		case c < 0x20:
			return "", ErrSlow
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", ErrSlow
}

// escapedStr reads the rest of a string with escapes that starts at
// b[start].
func (p *Parser) escapedStr(start int) (string, error) {
	out := make([]byte, 0, 2*(len(p.b)-start)/3+8)
	j := start
	for j < len(p.b) {
		c := p.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", ErrSlow
			}
			p.i = j + 1
			return string(out), nil
		case c < 0x20:
			return "", ErrSlow
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(p.b) {
			return "", ErrSlow
		}
		switch e := p.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(p.b[j+2:])
			if !ok {
				return "", ErrSlow
			}
			j += 6
			if utf16.IsSurrogate(r) {
				// A pair, or encoding/json's replacement rules apply.
				if len(p.b)-j < 6 || p.b[j] != '\\' || p.b[j+1] != 'u' {
					return "", ErrSlow
				}
				r2, ok := hex4(p.b[j+2:])
				if !ok {
					return "", ErrSlow
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", ErrSlow
				}
				j += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", ErrSlow
		}
		j += 2
	}
	return "", ErrSlow
}

// hex4 decodes four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number reads a number as a JSON value: int64 when it has no fraction or
// exponent and fits, else float64 (as Decode's normalizeNumbers).
func (p *Parser) number() (any, error) {
	p.space()
	start, j := p.i, p.i
	digits := func() int {
		k := j
		for j < len(p.b) && '0' <= p.b[j] && p.b[j] <= '9' {
			j++
		}
		return j - k
	}
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	switch {
	case j < len(p.b) && p.b[j] == '0':
		j++
	case digits() == 0:
		return nil, ErrSlow
	}
	integer := true
	if j < len(p.b) && p.b[j] == '.' {
		j++
		if digits() == 0 {
			return nil, ErrSlow
		}
		integer = false
	}
	if j < len(p.b) && (p.b[j] == 'e' || p.b[j] == 'E') {
		j++
		if j < len(p.b) && (p.b[j] == '+' || p.b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return nil, ErrSlow
		}
		integer = false
	}
	p.i = j
	s := string(p.b[start:j])
	if integer {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, ErrSlow
	}
	return f, nil
}

// Bool reads true or false.
func (p *Parser) Bool() (bool, error) {
	switch p.Peek() {
	case 't':
		return true, p.Literal("true")
	case 'f':
		return false, p.Literal("false")
	}
	return false, ErrSlow
}

// value reads any JSON value (see the package comment).
func (p *Parser) value() (any, error) {
	switch c := p.Peek(); {
	case c == '"':
		return p.Str()
	case c == '{' || c == '[':
		if p.depth >= MaxDepth {
			return nil, ErrDeep
		}
		p.depth++
		defer func() { p.depth-- }()
		if c == '{' {
			return p.objectValue()
		}
		out := []any{}
		err := p.Array(func() error {
			v, err := p.value()
			out = append(out, v)
			return err
		})
		return out, err
	case c == 't' || c == 'f':
		return p.Bool()
	case c == 'n':
		return nil, p.Literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	}
	return nil, ErrSlow
}

// objectValue reads an object as a map of JSON values.
func (p *Parser) objectValue() (map[string]any, error) {
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	out := map[string]any{}
	if p.Peek() == '}' {
		p.i++
		return out, nil
	}
	for {
		key, err := p.Str()
		if err != nil {
			return nil, err
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		if out[key], err = p.value(); err != nil {
			return nil, err
		}
		switch p.Peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return out, nil
		default:
			return nil, ErrSlow
		}
	}
}

// OptionalObject reads an object or null (nil), as the top level
// of a JSON value (MaxDepth counts from it).
func (p *Parser) OptionalObject() (map[string]any, error) {
	if p.Peek() == 'n' {
		return nil, p.Literal("null")
	}
	depth := p.depth
	p.depth = 1
	defer func() { p.depth = depth }()
	return p.objectValue()
}

// fast decodes a whole JSON text as a JSON value.
func fast(data []byte) (any, error) {
	p := Parser{b: data}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	return v, p.End()
}
