package workflow

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm/schema"
)

// StageOptions returns the agent loop options a node of mode may set
// (sorted): agent_loop's (an agent node) or llm_call's (an llm node)
// options that are data, but those set in model_policy. They are passed
// to the stage's agent loop or model call unchanged, and checked against
// the same rows (package agent's option tables).
func StageOptions(mode Mode) []string {
	table := agent.LoopOptions()
	if mode == ModeLLM {
		table = agent.CallOptions()
	} else if mode != ModeAgent {
		return nil
	}
	var out []string
	for _, r := range table.Rows() {
		if !r.Script && !contains(policyKeys, r.Name) {
			out = append(out, r.Name)
		}
	}
	sort.Strings(out)
	return out
}

// ownKeys are a node's keys that are not agent loop options.
var ownKeys = []string{"agent_ref", "fn", "input_contract", "mode", "model_policy", "output_contract", "prompt", "prompt_template", "system", "tools"}

// nodeKeys lists every key a node accepts, sorted.
func nodeKeys() []string {
	keys := append(append([]string{}, ownKeys...), StageOptions(ModeAgent)...)
	sort.Strings(keys)
	return keys
}

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
	if err := checkKeys(where, m, nodeKeys()); err != nil {
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
	if n.Mode == ModeInput || n.Mode == ModeOutput {
		for k := range m {
			if k != "mode" {
				return nil, fmt.Errorf("%s: '%s' is not allowed on an %s node (it takes only 'mode')", where, k, n.Mode)
			}
		}
		return n, nil
	}
	if n.Mode == ModeFn {
		for _, k := range []string{"prompt", "prompt_template", "system", "tools", "model_policy", "input_contract"} {
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
		key := "prompt_template"
		if _, ok := m[key]; !ok {
			key = "prompt" // the earlier name, still read
		} else if _, both := m["prompt"]; both {
			return nil, fmt.Errorf("%s: 'prompt' and 'prompt_template' are one key: give one of them", where)
		}
		if _, ok := m[key]; !ok {
			return nil, fmt.Errorf("%s: missing 'prompt' (or 'prompt_template')", where)
		}
		if n.Prompt, err = requiredString(m, key, where); err != nil {
			return nil, err
		}
		if n.prompt, err = parseTemplate(n.Prompt); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, key, err)
		}
	}
	if v, ok := m["agent_ref"]; ok {
		ref, isStr := v.(string)
		if !isStr || strings.TrimSpace(ref) == "" {
			return nil, fmt.Errorf("%s: 'agent_ref': got %s, want an agent's name", where, typeName(v))
		}
		if n.Mode != ModeAgent {
			return nil, fmt.Errorf("%s: 'agent_ref' is only allowed on an agent node", where)
		}
		for _, k := range []string{"system", "tools"} {
			if _, ok := m[k]; ok {
				return nil, fmt.Errorf("%s: '%s' is not allowed with agent_ref (the agent decides it)", where, k)
			}
		}
		if mp, ok := m["model_policy"].(map[string]any); ok {
			for _, k := range []string{"provider", "model", "base_url", "api_version"} {
				if _, ok := mp[k]; ok {
					return nil, fmt.Errorf("%s: model_policy '%s' is not allowed with agent_ref (the agent decides it)", where, k)
				}
			}
		}
		n.AgentRef = ref
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
	allowed := StageOptions(n.Mode)
	for _, key := range StageOptions(ModeAgent) {
		val, ok := m[key]
		if !ok {
			continue
		}
		if !contains(allowed, key) {
			return nil, fmt.Errorf("%s: option '%s' is not allowed on an %s node", where, key, n.Mode)
		}
		if err := agent.LoopOptions().Row(key).Check(val); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
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
