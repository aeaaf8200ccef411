package workflow

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/skein-dev/skein/llm/schema"
)

// kind is the expected type of a node option.
type kind int

const (
	kindInt      kind = iota // an integer >= min
	kindNumber               // an int or float > 0
	kindBool                 //
	kindString               //
	kindStrings              // a string or a list of strings
	kindChoice               // one of choices
	kindStrOrMap             // a string or a map (compaction)
	kindMaps                 // a list of maps (fallback)
	kindMap                  // a map (thinking)
)

// optionSpec describes one agent loop option a node may carry.
type optionSpec struct {
	kind    kind
	min     int64
	choices []string
	llm     bool // also valid on llm nodes
}

// stageOptions are the agent loop options a node may set besides its own
// keys; they are passed to the stage's loop (or model call) unchanged.
var stageOptions = map[string]optionSpec{
	"cache":                 {kind: kindChoice, choices: []string{"auto", "none"}, llm: true},
	"compact_threshold":     {kind: kindInt, min: 1},
	"compaction":            {kind: kindStrOrMap},
	"context_budget":        {kind: kindInt, min: 1},
	"fallback":              {kind: kindMaps, llm: true},
	"llm_backoff_ms":        {kind: kindInt, min: 0, llm: true},
	"llm_retries":           {kind: kindInt, min: 0, llm: true},
	"max_cost_usd":          {kind: kindNumber},
	"max_iterations":        {kind: kindInt, min: 1},
	"max_nudges":            {kind: kindInt, min: 0},
	"max_turns":             {kind: kindInt, min: 1},
	"output_retries":        {kind: kindInt, min: 0, llm: true},
	"output_schema":         {kind: kindMap, llm: true},
	"persistent":            {kind: kindBool},
	"stop":                  {kind: kindStrings, llm: true},
	"stream":                {kind: kindBool, llm: true},
	"thinking":              {kind: kindMap, llm: true},
	"timeout_s":             {kind: kindNumber, llm: true},
	"tool_errors":           {kind: kindChoice, choices: []string{"raise", "report"}},
	"tool_output_max_chars": {kind: kindInt, min: 0},
}

// StageOptions returns the agent loop options a node of mode may set
// (sorted): they are passed to the stage's agent loop or model call.
func StageOptions(mode Mode) []string {
	var out []string
	for k, spec := range stageOptions {
		if mode == ModeAgent || mode == ModeLLM && spec.llm {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ownKeys are a node's keys that are not agent loop options.
var ownKeys = []string{"fn", "input_contract", "mode", "model_policy", "output_contract", "prompt", "system", "tools"}

// nodeKeys lists every key a node accepts, sorted.
var nodeKeys = func() []string {
	keys := append([]string{}, ownKeys...)
	for k := range stageOptions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}()

var (
	policyKeys = []string{"api_version", "base_url", "max_tokens", "model", "provider", "session_id", "temperature"}
	inputKeys  = []string{"require_transcript"}
	outputKeys = []string{"json_schema"}
)

func decodeNode(name string, v any) (*Node, error) {
	where := fmt.Sprintf("node '%s'", name)
	if strings.TrimSpace(name) == "" {
		return nil, fmt.Errorf("graph: a node name must not be empty")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: got %s, want a map", where, typeName(v))
	}
	if err := checkKeys(where, m, nodeKeys); err != nil {
		return nil, err
	}
	n := &Node{Name: name, Options: map[string]any{}}
	mode, err := requiredString(m, "mode", where)
	if err != nil {
		return nil, err
	}
	n.Mode = Mode(mode)
	if !contains(modeNames(), mode) {
		return nil, fmt.Errorf("%s: unknown mode '%s' (expected one of: %s)", where, mode, strings.Join(modeNames(), ", "))
	}
	if n.Mode == ModeFn {
		for _, k := range []string{"prompt", "system", "tools", "model_policy", "input_contract"} {
			if _, ok := m[k]; ok {
				return nil, fmt.Errorf("%s: '%s' is not allowed on an fn node", where, k)
			}
		}
		if n.Fn, err = requiredString(m, "fn", where); err != nil {
			return nil, err
		}
	} else {
		if _, ok := m["fn"]; ok {
			return nil, fmt.Errorf("%s: 'fn' is only allowed on an fn node", where)
		}
		if n.Prompt, err = requiredString(m, "prompt", where); err != nil {
			return nil, err
		}
		if n.prompt, err = parseTemplate(n.Prompt); err != nil {
			return nil, fmt.Errorf("%s: prompt: %w", where, err)
		}
	}
	if v, ok := m["system"]; ok {
		if n.System, ok = v.(string); !ok {
			return nil, fmt.Errorf("%s: 'system': got %s, want string", where, typeName(v))
		}
	}
	if v, ok := m["tools"]; ok {
		list, isList := v.([]any)
		if !isList {
			return nil, fmt.Errorf("%s: 'tools': got %s, want a list of tool names", where, typeName(v))
		}
		for i, t := range list {
			s, isStr := t.(string)
			if !isStr || s == "" {
				return nil, fmt.Errorf("%s: tools[%d]: got %s, want a tool name", where, i, typeName(t))
			}
			n.Tools = append(n.Tools, s)
		}
	}
	if err := n.decodePolicy(where, m["model_policy"]); err != nil {
		return nil, err
	}
	if err := n.decodeContracts(where, m); err != nil {
		return nil, err
	}
	for key, val := range m {
		spec, ok := stageOptions[key]
		if !ok {
			continue
		}
		if n.Mode == ModeFn || (n.Mode == ModeLLM && !spec.llm) {
			return nil, fmt.Errorf("%s: option '%s' is not allowed on an %s node", where, key, n.Mode)
		}
		if err := checkOption(where, key, spec, val); err != nil {
			return nil, err
		}
		n.Options[key] = val
	}
	return n, nil
}

func modeNames() []string {
	out := make([]string, len(Modes))
	for i, m := range Modes {
		out[i] = string(m)
	}
	return out
}

func (n *Node) decodePolicy(where string, v any) error {
	if v == nil {
		return nil
	}
	where += ": model_policy"
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: got %s, want a map", where, typeName(v))
	}
	if err := checkKeys(where, m, policyKeys); err != nil {
		return err
	}
	p := &n.ModelPolicy
	for key, dst := range map[string]*string{"provider": &p.Provider, "model": &p.Model, "base_url": &p.BaseURL, "api_version": &p.APIVersion, "session_id": &p.SessionID} {
		if x, ok := m[key]; ok && x != nil {
			s, isStr := x.(string)
			if !isStr {
				return fmt.Errorf("%s: '%s': got %s, want string", where, key, typeName(x))
			}
			*dst = s
		}
	}
	p.SessionID = strings.TrimSpace(p.SessionID)
	if x, ok := m["temperature"]; ok && x != nil {
		f, isNum := number(x)
		if !isNum {
			return fmt.Errorf("%s: 'temperature': got %s, want a number", where, typeName(x))
		}
		p.Temperature = &f
	}
	if x, ok := m["max_tokens"]; ok && x != nil {
		i, isInt := x.(int64)
		if !isInt || i < 1 || i > math.MaxInt32 {
			return fmt.Errorf("%s: 'max_tokens': got %v, want an int >= 1", where, x)
		}
		mt := int(i)
		p.MaxTokens = &mt
	}
	return nil
}

func (n *Node) decodeContracts(where string, m map[string]any) error {
	if v, ok := m["input_contract"]; ok {
		w := where + ": input_contract"
		ic, isMap := v.(map[string]any)
		if !isMap {
			return fmt.Errorf("%s: got %s, want a map", w, typeName(v))
		}
		if err := checkKeys(w, ic, inputKeys); err != nil {
			return err
		}
		if x, ok := ic["require_transcript"]; ok {
			b, isBool := x.(bool)
			if !isBool {
				return fmt.Errorf("%s: 'require_transcript': got %s, want bool", w, typeName(x))
			}
			n.RequireTranscript = b
		}
	}
	if v, ok := m["output_contract"]; ok {
		w := where + ": output_contract"
		oc, isMap := v.(map[string]any)
		if !isMap {
			return fmt.Errorf("%s: got %s, want a map", w, typeName(v))
		}
		if err := checkKeys(w, oc, outputKeys); err != nil {
			return err
		}
		if x, ok := oc["json_schema"]; ok {
			doc, isMap := x.(map[string]any)
			if !isMap {
				return fmt.Errorf("%s: 'json_schema': got %s, want a JSON Schema map", w, typeName(x))
			}
			compiled, err := schema.Compile(doc)
			if err != nil {
				return fmt.Errorf("%s: json_schema: %w", w, err)
			}
			n.OutputSchema, n.contract = doc, compiled
		}
	}
	return nil
}

func number(v any) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

func checkOption(where, key string, spec optionSpec, v any) error {
	bad := func(want string) error {
		return fmt.Errorf("%s: option '%s': got %s, want %s", where, key, typeName(v), want)
	}
	switch spec.kind {
	case kindInt:
		i, ok := v.(int64)
		if !ok {
			return bad("int")
		}
		if i < spec.min {
			return fmt.Errorf("%s: option '%s' must be >= %d", where, key, spec.min)
		}
	case kindNumber:
		f, ok := number(v)
		if !ok {
			return bad("int or float")
		}
		if !(f > 0) || math.IsInf(f, 0) {
			return fmt.Errorf("%s: option '%s' must be > 0", where, key)
		}
	case kindBool:
		if _, ok := v.(bool); !ok {
			return bad("bool")
		}
	case kindStrings:
		if _, ok := v.(string); ok {
			return nil
		}
		list, ok := v.([]any)
		if !ok {
			return bad("string or list of strings")
		}
		for _, x := range list {
			if _, ok := x.(string); !ok {
				return bad("string or list of strings")
			}
		}
	case kindChoice:
		s, ok := v.(string)
		if !ok {
			return bad("string")
		}
		if !contains(spec.choices, s) {
			return fmt.Errorf("%s: option '%s': unknown value '%s' (expected one of: %s)", where, key, s, strings.Join(spec.choices, ", "))
		}
	case kindStrOrMap:
		switch v.(type) {
		case string, map[string]any:
		default:
			return bad("string or map")
		}
	case kindMap:
		if _, ok := v.(map[string]any); !ok {
			return bad("map")
		}
	case kindMaps:
		list, ok := v.([]any)
		if !ok {
			return bad("list of maps")
		}
		for _, x := range list {
			if _, ok := x.(map[string]any); !ok {
				return bad("list of maps")
			}
		}
	}
	return nil
}
