// Package yamlfile reads and writes skein's YAML files (workflow files,
// agent files): reading refuses tabs and gives line numbers, and values
// come back in one canonical form (Normalize); writing is byte-stable
// (Dump), with its own emitter so the bytes depend on nothing but the
// value.
package yamlfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
)

// Parse reads a YAML document into its canonical form (Normalize). Tabs
// (anywhere: YAML forbids them in indentation and they are a likely
// accident elsewhere) and duplicate keys are refused; errors give the
// line.
func Parse(data []byte) (any, error) {
	if i := bytes.IndexByte(data, '\t'); i >= 0 {
		line := bytes.Count(data[:i], []byte("\n")) + 1
		return nil, fmt.Errorf("line %d: a tab character (indent with spaces; write \\t inside a quoted string)", line)
	}
	var v any
	if err := yaml.UnmarshalWithOptions(data, &v); err != nil {
		return nil, fmt.Errorf("%s", yaml.FormatError(err, false, false))
	}
	return Normalize(v, "file")
}

// KeyLine returns the line (from 1) of the top-level key in a YAML
// document, or 0 when it is not found.
func KeyLine(data []byte, key string) int {
	for i, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			if q := strconv.Quote(key); strings.HasPrefix(line, q) {
				rest, ok = line[len(q):], true
			}
		}
		if ok && strings.HasPrefix(strings.TrimLeft(rest, " "), ":") {
			return i + 1
		}
	}
	return 0
}

// Normalize copies a JSON-like value into the canonical form: int64
// integers, float64 floats, []any lists and map[string]any maps.
func Normalize(v any, path string) (any, error) {
	switch v := v.(type) {
	case nil, bool, string, int64, float64:
		return v, nil
	case int:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case uint64:
		if v > 1<<63-1 {
			return nil, fmt.Errorf("%s: integer %d is too large", path, v)
		}
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case float32:
		return float64(v), nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: bad number %s", path, v)
		}
		return f, nil
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			n, err := Normalize(x, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			n, err := Normalize(x, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: unsupported value of type %T", path, v)
}

// Dump writes m as YAML: every map's keys sorted, two-space indentation,
// sequences indented under their key, strings plain when that is
// unambiguous, multi-line strings as literal blocks and everything else
// double-quoted with JSON escapes, floats with a decimal point. Parse
// then Dump of Dump's output gives the same bytes.
func Dump(m map[string]any) []byte {
	var e emitter
	e.entries(m, 0, false)
	return e.buf.Bytes()
}

type emitter struct{ buf bytes.Buffer }

func (e *emitter) indent(n int) {
	for i := 0; i < n; i++ {
		e.buf.WriteByte(' ')
	}
}

// entries writes a map's entries at column indent, keys sorted; with
// inline the first entry continues the current line ("- key: v").
func (e *emitter) entries(m map[string]any, indent int, inline bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 || !inline {
			e.indent(indent)
		}
		if plainString(k) {
			e.buf.WriteString(k)
		} else {
			e.quoted(k)
		}
		e.buf.WriteByte(':')
		e.value(m[k], indent)
	}
}

// items writes a list's items at column indent; with inline the first
// item continues the current line ("- - v").
func (e *emitter) items(l []any, indent int, inline bool) {
	for i, x := range l {
		if i > 0 || !inline {
			e.indent(indent)
		}
		e.buf.WriteByte('-')
		switch x := x.(type) {
		case map[string]any:
			if len(x) > 0 {
				e.buf.WriteByte(' ')
				e.entries(x, indent+2, true)
				continue
			}
		case []any:
			if len(x) > 0 {
				e.buf.WriteByte(' ')
				e.items(x, indent+2, true)
				continue
			}
		}
		e.value(x, indent)
	}
}

// value writes v after a "key:" or "-" at column indent, through the end
// of its last line.
func (e *emitter) value(v any, indent int) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			e.buf.WriteString(" {}\n")
			return
		}
		e.buf.WriteByte('\n')
		e.entries(v, indent+2, false)
		return
	case []any:
		if len(v) == 0 {
			e.buf.WriteString(" []\n")
			return
		}
		e.buf.WriteByte('\n')
		e.items(v, indent+2, false)
		return
	}
	e.buf.WriteByte(' ')
	switch v := v.(type) {
	case nil:
		e.buf.WriteString("null")
	case bool:
		e.buf.WriteString(strconv.FormatBool(v))
	case int64:
		e.buf.WriteString(strconv.FormatInt(v, 10))
	case float64:
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		e.buf.WriteString(s)
	case string:
		switch {
		case plainString(v):
			e.buf.WriteString(v)
		case literalSafe(v):
			e.literal(v, indent+2)
			return
		default:
			e.quoted(v)
		}
	}
	e.buf.WriteByte('\n')
}

// literal writes a multi-line string as a literal block whose lines are
// at column indent.
func (e *emitter) literal(s string, indent int) {
	body := strings.TrimRight(s, "\n")
	switch trailing := len(s) - len(body); {
	case trailing == 0:
		e.buf.WriteString("|-\n")
	case trailing == 1:
		e.buf.WriteString("|\n")
	default:
		e.buf.WriteString("|+\n")
	}
	for _, line := range strings.Split(s[:len(s)-min(1, len(s)-len(body))], "\n") {
		if line != "" {
			e.indent(indent)
			e.buf.WriteString(line)
		}
		e.buf.WriteByte('\n')
	}
}

// quoted writes s double-quoted with JSON escapes, which YAML reads back
// unchanged.
func (e *emitter) quoted(s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	e.buf.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// plain matches strings that read back as the same string when written
// without quotes, given the checks in plainString.
var plain = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9 _./(){}\[\]<>=!&|"',+*?@$%^~;:#-]*$`)
})

// plainString reports whether s can be written without quotes.
func plainString(s string) bool {
	if !plain().MatchString(s) || strings.Contains(s, ": ") || strings.Contains(s, " #") ||
		strings.HasSuffix(s, ":") || strings.HasSuffix(s, " ") {
		return false
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
		return false
	}
	return true
}

// literalSafe reports whether a multi-line string reads back unchanged
// from a literal block: no control characters or Unicode line breaks, no
// line with trailing spaces, no leading space or newline.
func literalSafe(s string) bool {
	if !strings.Contains(s, "\n") || !utf8.ValidString(s) || strings.HasPrefix(s, " ") || strings.HasPrefix(s, "\n") {
		return false
	}
	for _, r := range s {
		if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == 0x2028 || r == 0x2029 || r == 0xfeff) {
			return false
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.HasSuffix(line, " ") {
			return false
		}
	}
	return true
}
