package workflow

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// A template is a parsed prompt: literal text and placeholders.
//
//	{task}           the run's task
//	{output}         the previous stage's output ("" for the first stage)
//	{outputs.NODE}   NODE's last output ("" if it has not run)
//	{vars.KEY}       vars[KEY] (a string as is, anything else as JSON)
//	{{ and }}        literal braces
type template struct {
	parts []part
}

type part struct {
	text string // literal text, when kind is ""
	kind string // "task", "output", "outputs", "vars"
	key  string // the node or var name
}

func parseTemplate(s string) (*template, error) {
	t := &template{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '}':
			return nil, fmt.Errorf("single '}' at offset %d (write '}}' for a literal brace)", i)
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unclosed '{' at offset %d (write '{{' for a literal brace)", i)
			}
			name := s[i+1 : i+end]
			p, err := placeholder(name)
			if err != nil {
				return nil, err
			}
			flush()
			t.parts = append(t.parts, p)
			i += end
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

func placeholder(name string) (part, error) {
	switch name {
	case "task", "output":
		return part{kind: name}, nil
	}
	if kind, key, ok := strings.Cut(name, "."); ok && (kind == "outputs" || kind == "vars") && key != "" {
		return part{kind: kind, key: key}, nil
	}
	return part{}, fmt.Errorf("unknown placeholder {%s} (expected {task}, {output}, {outputs.NODE} or {vars.KEY}; write {{ and }} for literal braces)", name)
}

// checkNodes fails when an {outputs.NODE} placeholder names no node.
func (t *template) checkNodes(node string, nodes map[string]*Node) error {
	if t == nil {
		return nil
	}
	for _, p := range t.parts {
		if p.kind == "outputs" && nodes[p.key] == nil {
			names := make([]string, 0, len(nodes))
			for n := range nodes {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("node '%s': prompt: {outputs.%s} names no node (nodes: %s)", node, p.key, strings.Join(names, ", "))
		}
	}
	return nil
}

// render fills the template in. A {vars.KEY} whose key is missing is an
// error; an {outputs.NODE} of a node that has not run is empty.
func (t *template) render(task, output string, outputs map[string]string, vars map[string]any) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.kind {
		case "":
			b.WriteString(p.text)
		case "task":
			b.WriteString(task)
		case "output":
			b.WriteString(output)
		case "outputs":
			b.WriteString(outputs[p.key])
		case "vars":
			v, ok := vars[p.key]
			if !ok {
				return "", fmt.Errorf("prompt: {vars.%s}: vars has no key '%s'", p.key, p.key)
			}
			if s, isStr := v.(string); isStr {
				b.WriteString(s)
				continue
			}
			j, err := json.Marshal(v)
			if err != nil {
				return "", fmt.Errorf("prompt: {vars.%s}: %w", p.key, err)
			}
			b.Write(j)
		}
	}
	return b.String(), nil
}
