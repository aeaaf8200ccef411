package message

import (
	"cmp"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// MinSecretLen is the shortest secret value a Redactor replaces: shorter
// values (a "1", a "yes") would mangle ordinary text wherever they occur.
const MinSecretLen = 6

// Redactor replaces known secret values with "<secret NAME>" in text that
// is about to be stored or shown: tool results, command and HTTP results,
// provider replies. A VM adds every secret its script looks up and every
// provider key it uses; the session store redacts every message appended and
// every event logged. It is safe for concurrent use; the zero value
// knows no secrets.
type Redactor struct {
	mu      sync.RWMutex
	secrets []namedSecret // longest value first, so that a secret containing another is replaced whole
}

type namedSecret struct{ name, value string }

// NewRedactor returns a Redactor that knows no secrets yet.
func NewRedactor() *Redactor { return &Redactor{} }

// Add makes r replace value with "<secret name>", and the forms a
// server or a command echoes it in: JSON-escaped (\", \\, \/, \u003c)
// and URL-encoded (query and path escaping, upper- and lowercase hex).
// Values shorter than MinSecretLen are ignored.
func (r *Redactor) Add(name, value string) {
	if r == nil || len(value) < MinSecretLen {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range secretForms(value) {
		if !slices.ContainsFunc(r.secrets, func(s namedSecret) bool { return s.value == v }) {
			r.secrets = append(r.secrets, namedSecret{name, v})
		}
	}
	slices.SortStableFunc(r.secrets, func(a, b namedSecret) int { return cmp.Compare(len(b.value), len(a.value)) })
}

// secretForms returns value and the distinct forms it takes escaped in
// JSON or a URL.
func secretForms(value string) []string {
	forms := []string{value}
	add := func(v string) {
		if !slices.Contains(forms, v) {
			forms = append(forms, v)
		}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, html := range []bool{false, true} {
		b.Reset()
		enc.SetEscapeHTML(html)
		if enc.Encode(value) != nil {
			continue
		}
		j := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), `"`), `"`)
		add(j)
		add(strings.ReplaceAll(j, "/", `\/`))
	}
	for _, u := range []string{url.QueryEscape(value), url.PathEscape(value)} {
		add(u)
		add(lowerHex(u))
	}
	return forms
}

// lowerHex returns the URL-encoded u with its %XX escapes in lowercase.
func lowerHex(u string) string {
	b := []byte(u)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLowerASCII(b[i+1]), toLowerASCII(b[i+2])
		}
	}
	return string(b)
}

func toLowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// Redact returns s with every known secret value replaced by its
// placeholder.
func (r *Redactor) Redact(s string) string {
	if r == nil {
		return s
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sec := range r.secrets {
		if strings.Contains(s, sec.value) {
			s = strings.ReplaceAll(s, sec.value, "<secret "+sec.name+">")
		}
	}
	return s
}

// empty reports whether r knows no secret.
// Empty reports whether r knows no secrets (a nil r knows none): redacting
// with it changes nothing.
func (r *Redactor) Empty() bool {
	if r == nil {
		return true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.secrets) == 0
}

// RedactValue returns the JSON value v with its strings (and object keys)
// redacted; it shares what needs no change.
func (r *Redactor) RedactValue(v any) any {
	out, _ := r.redactValue(v)
	return out
}

// redactValue is RedactValue reporting whether anything changed.
func (r *Redactor) redactValue(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		out := r.Redact(v)
		return out, out != v
	case []any:
		var out []any
		for i, x := range v {
			if y, changed := r.redactValue(x); changed {
				if out == nil {
					out = slices.Clone(v)
				}
				out[i] = y
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case map[string]any:
		var out map[string]any
		for k, x := range v {
			k2 := r.Redact(k)
			y, changed := r.redactValue(x)
			if k2 == k && !changed {
				continue
			}
			if out == nil {
				out = maps.Clone(v)
			}
			delete(out, k)
			out[k2] = y
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return v, false
}

// RedactMessage returns m with its text, content blocks (text blocks),
// tool calls (names, ids, arguments), tool name and call id, model and
// metadata redacted: a server may echo a key in any of them. Thinking
// blocks are left as they are: providers sign them, and a changed block
// is refused when it is sent back.
func (r *Redactor) RedactMessage(m Message) Message {
	if r.Empty() {
		return m
	}
	m.Text = r.Redact(m.Text)
	m.Name, m.ToolCallID, m.Model = r.Redact(m.Name), r.Redact(m.ToolCallID), r.Redact(m.Model)
	if m.Blocks != nil {
		blocks := slices.Clone(m.Blocks)
		for i := range blocks {
			if blocks[i].Type == BlockText {
				blocks[i].Text = r.Redact(blocks[i].Text)
			}
		}
		m.Blocks = blocks
	}
	if m.ToolCalls != nil {
		calls := slices.Clone(m.ToolCalls)
		for i := range calls {
			calls[i].Name, calls[i].ID = r.Redact(calls[i].Name), r.Redact(calls[i].ID)
			if args, ok := r.RedactValue(map[string]any(calls[i].Arguments)).(map[string]any); ok {
				calls[i].Arguments = args
			}
		}
		m.ToolCalls = calls
	}
	if m.Metadata != nil {
		m.Metadata, _ = r.RedactValue(m.Metadata).(map[string]any)
	}
	return m
}
