package mock

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

// Keys lists the keys of a response (llm_mock's parameters and a fixture
// line's fields), sorted.
var Keys = []string{"consume_match", "delay_ms", "error", "input_tokens", "match", "model", "output_tokens", "text", "thinking", "tool_calls"}

// RequestKey is a fixture line's record of the request it answered: the
// provider, the normalised request and its fingerprint (see Recorded).
const RequestKey = "request"

// ParseResponse builds a Response from its JSON-value form: the keys of
// llm_mock. Unknown keys and wrong types are errors.
func ParseResponse(m map[string]any) (Response, error) {
	r := Response{InputTokens: -1, OutputTokens: -1}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if v == nil {
			continue
		}
		var err error
		switch k {
		case "text":
			r.Text, err = str(k, v)
		case "match":
			r.Match, err = str(k, v)
		case "thinking":
			r.Thinking, err = str(k, v)
		case "model":
			r.Model, err = str(k, v)
		case "consume_match":
			b, ok := v.(bool)
			if !ok {
				err = fmt.Errorf("'consume_match' must be a bool, got %s", jsonvalue.TypeName(v))
			}
			r.ConsumeMatch = b
		case "input_tokens":
			r.InputTokens, err = count(k, v)
		case "output_tokens":
			r.OutputTokens, err = count(k, v)
		case "delay_ms":
			var ms int
			if ms, err = count(k, v); err == nil && ms > maxDelayMS {
				err = fmt.Errorf("'%s' is too large", k)
			}
			r.Delay = time.Duration(ms) * time.Millisecond
		case "tool_calls":
			r.ToolCalls, err = parseCalls(v)
		case "error":
			r.Error, err = parseFailure(v)
		default:
			err = fmt.Errorf("unknown key '%s' (expected one of: %s)", k, strings.Join(Keys, ", "))
		}
		if err != nil {
			return Response{}, err
		}
	}
	if r.Error != nil && (r.Text != "" || len(r.ToolCalls) > 0) {
		return Response{}, fmt.Errorf("a response with 'error' cannot also have 'text' or 'tool_calls'")
	}
	if r.Error == nil {
		// The reply becomes an assistant message: the message validator
		// of inject and import checks it here, not when a call serves it.
		m := message.Message{Role: message.RoleAssistant, Text: r.Text, ToolCalls: r.calls()}
		if err := message.CheckShape(&m); err != nil {
			return Response{}, err
		}
	}
	return r, nil
}

func str(k string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("'%s' must be a string, got %s", k, jsonvalue.TypeName(v))
	}
	return s, nil
}

// maxDelayMS bounds delay_ms (1e9 seconds, about 31 years): a larger
// value would overflow a time.Duration and wrap around.
const maxDelayMS = 1e12

func count(k string, v any) (int, error) {
	n, ok := v.(int64)
	if !ok || n < 0 {
		return 0, fmt.Errorf("'%s' must be an int >= 0", k)
	}
	return int(n), nil
}

func parseCalls(v any) ([]Call, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("'tool_calls' must be a list of {name, arguments} dicts, got %s", jsonvalue.TypeName(v))
	}
	calls := make([]Call, 0, len(list))
	for i, x := range list {
		d, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("tool_calls[%d] must be a dict, got %s", i, jsonvalue.TypeName(x))
		}
		var c Call
		for _, k := range slices.Sorted(maps.Keys(d)) {
			switch k {
			case "name":
				s, ok := d[k].(string)
				if !ok || s == "" {
					return nil, fmt.Errorf("tool_calls[%d] must have a non-empty string 'name'", i)
				}
				c.Name = s
			case "arguments":
				if d[k] == nil {
					continue
				}
				args, ok := d[k].(map[string]any)
				if !ok {
					return nil, fmt.Errorf("tool_calls[%d].arguments must be a dict, got %s", i, jsonvalue.TypeName(d[k]))
				}
				c.Arguments = args
			default:
				return nil, fmt.Errorf("tool_calls[%d]: unknown key '%s' (expected one of: arguments, name)", i, k)
			}
		}
		if c.Name == "" {
			return nil, fmt.Errorf("tool_calls[%d] must have a non-empty string 'name'", i)
		}
		calls = append(calls, c)
	}
	return calls, nil
}

func parseFailure(v any) (*Failure, error) {
	d, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("'error' must be a dict {category, message, retry_after_ms?}, got %s", jsonvalue.TypeName(v))
	}
	f := &Failure{}
	for _, k := range slices.Sorted(maps.Keys(d)) {
		switch k {
		case "category":
			s, _ := d[k].(string)
			if !llm.Category(s).Valid() {
				names := make([]string, len(llm.Categories))
				for i, c := range llm.Categories {
					names[i] = string(c)
				}
				sort.Strings(names)
				return nil, fmt.Errorf("unknown error category %v (expected one of: %s)", d[k], strings.Join(names, ", "))
			}
			f.Category = llm.Category(s)
		case "message":
			s, ok := d[k].(string)
			if !ok {
				return nil, fmt.Errorf("error.message must be a string")
			}
			f.Message = s
		case "retry_after_ms":
			ms, err := count("error.retry_after_ms", d[k])
			if err != nil {
				return nil, err
			}
			f.RetryAfter = time.Duration(ms) * time.Millisecond
		default:
			return nil, fmt.Errorf("error: unknown key '%s' (expected one of: category, message, retry_after_ms)", k)
		}
	}
	if f.Category == "" {
		return nil, fmt.Errorf("'error' needs a 'category'")
	}
	if f.Message == "" {
		f.Message = "mock " + string(f.Category) + " error"
	}
	return f, nil
}

// LoadFixture reads a JSONL replay fixture: one response per line, with
// the keys of llm_mock. Blank lines and lines starting with # are skipped.
// Errors name the line.
func LoadFixture(r io.Reader, name string) ([]Response, error) {
	var out []Response
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		m, err := jsonvalue.DecodeObject([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		rec, err := parseRecorded(m[RequestKey])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		delete(m, RequestKey)
		resp, err := ParseResponse(m)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		resp.Recorded, resp.Source = rec, fmt.Sprintf("%s:%d", name, line)
		out = append(out, resp)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return out, nil
}

// FixtureLine renders a provider's response as one fixture line, the
// form LoadFixture reads: what --llm-record writes.
func FixtureLine(resp *llm.Response) ([]byte, error) {
	m := map[string]any{}
	if resp.Text != "" {
		m["text"] = resp.Text
	}
	if len(resp.ToolCalls) > 0 {
		calls := make([]any, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			calls[i] = map[string]any{"name": c.Name, "arguments": c.Arguments}
		}
		m["tool_calls"] = calls
	}
	var thinking []string
	for _, b := range resp.Thinking {
		thinking = append(thinking, b.Thinking)
	}
	if len(thinking) > 0 {
		m["thinking"] = strings.Join(thinking, "\n")
	}
	if resp.Model != "" {
		m["model"] = resp.Model
	}
	m["input_tokens"] = resp.Usage.InputTokens
	m["output_tokens"] = resp.Usage.OutputTokens
	return json.Marshal(m)
}
