package agent

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/skein-dev/skein/sessions"
)

// ValidateArgs checks tool-call arguments (JSON values) against a JSON
// Schema. It supports the subset tool schemas use: type (a name or a list
// of names), properties, required, additionalProperties (bool or schema),
// enum, items, minimum, maximum, minLength, maxLength, minItems, maxItems.
// Other keywords are ignored. The error names the offending path.
func ValidateArgs(args map[string]any, schema map[string]any) error {
	if schema == nil {
		return nil
	}
	return validate("arguments", args, schema)
}

func validate(path string, v any, schema map[string]any) error {
	if t, ok := schema["type"]; ok {
		if err := checkType(path, v, t); err != nil {
			return err
		}
	}
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if jsonEqual(e, v) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s: %s is not one of the allowed values %s", path, show(v), show(enum))
		}
	}
	switch v := v.(type) {
	case map[string]any:
		return validateObject(path, v, schema)
	case []any:
		if n, ok := intKeyword(schema, "minItems"); ok && len(v) < n {
			return fmt.Errorf("%s: has %d items, want at least %d", path, len(v), n)
		}
		if n, ok := intKeyword(schema, "maxItems"); ok && len(v) > n {
			return fmt.Errorf("%s: has %d items, want at most %d", path, len(v), n)
		}
		if items, ok := schema["items"].(map[string]any); ok {
			for i, x := range v {
				if err := validate(fmt.Sprintf("%s[%d]", path, i), x, items); err != nil {
					return err
				}
			}
		}
	case string:
		n := len([]rune(v))
		if m, ok := intKeyword(schema, "minLength"); ok && n < m {
			return fmt.Errorf("%s: is %d characters long, want at least %d", path, n, m)
		}
		if m, ok := intKeyword(schema, "maxLength"); ok && n > m {
			return fmt.Errorf("%s: is %d characters long, want at most %d", path, n, m)
		}
	case int64, float64:
		f := toFloat(v)
		if m, ok := numKeyword(schema, "minimum"); ok && f < m {
			return fmt.Errorf("%s: %s is less than the minimum %s", path, show(v), show(schema["minimum"]))
		}
		if m, ok := numKeyword(schema, "maximum"); ok && f > m {
			return fmt.Errorf("%s: %s is more than the maximum %s", path, show(v), show(schema["maximum"]))
		}
	}
	return nil
}

func validateObject(path string, v map[string]any, schema map[string]any) error {
	props, _ := schema["properties"].(map[string]any)
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			name, _ := r.(string)
			if _, present := v[name]; !present {
				return fmt.Errorf("%s: missing required argument '%s'", path, name)
			}
		}
	}
	for _, k := range sessions.SortedKeys(v) {
		sub, known := props[k].(map[string]any)
		if known {
			if err := validate(path+"."+k, v[k], sub); err != nil {
				return err
			}
			continue
		}
		switch extra := schema["additionalProperties"].(type) {
		case bool:
			if !extra {
				return fmt.Errorf("%s: unexpected argument '%s' (expected: %s)", path, k, strings.Join(sessions.SortedKeys(props), ", "))
			}
		case map[string]any:
			if err := validate(path+"."+k, v[k], extra); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkType(path string, v any, t any) error {
	var names []string
	switch t := t.(type) {
	case string:
		names = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				names = append(names, s)
			}
		}
	default:
		return nil
	}
	for _, n := range names {
		if hasType(v, n) {
			return nil
		}
	}
	sort.Strings(names)
	return fmt.Errorf("%s: got %s, want %s", path, sessions.JSONTypeName(v), strings.Join(names, " or "))
}

func hasType(v any, name string) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "integer":
		switch x := v.(type) {
		case int64:
			return true
		case float64:
			return x == math.Trunc(x) && !math.IsInf(x, 0)
		}
	case "number":
		switch v.(type) {
		case int64, float64:
			return true
		}
	}
	return false
}

func intKeyword(schema map[string]any, k string) (int, bool) {
	f, ok := numKeyword(schema, k)
	return int(f), ok
}

func numKeyword(schema map[string]any, k string) (float64, bool) {
	switch x := schema[k].(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

func jsonEqual(a, b any) bool {
	if isNum(a) && isNum(b) {
		return toFloat(a) == toFloat(b)
	}
	return show(a) == show(b)
}

func isNum(v any) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

// show renders a JSON value for error messages.
func show(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case nil:
		return "null"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := sessions.SortedKeys(x)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%q: %s", k, show(x[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}
