package workflow

import (
	"fmt"

	"github.com/skein-dev/skein/internal/yamlfile"
)

// Parse reads a workflow file: YAML with the keys Decode accepts. Tabs
// (anywhere: YAML forbids them in indentation and they are a likely
// accident elsewhere) and duplicate keys are refused; errors give the
// line.
func Parse(data []byte) (*Graph, error) { return ParseWith(data, nil) }

// ParseWith is Parse with agents (full definitions) added to the file's
// own agents: list.
func ParseWith(data []byte, agents []any) (*Graph, error) {
	if err := checkYAMLShape(data); err != nil {
		return nil, err
	}
	v, err := yamlfile.Parse(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the file must hold a map (name, entry, nodes, edges), got %s", yamlType(v))
	}
	if len(agents) > 0 {
		own, _ := m["agents"].([]any)
		m["agents"] = append(append([]any{}, own...), agents...)
	}
	return Decode(m)
}

func yamlType(v any) string {
	if v == nil {
		return "an empty document"
	}
	n, err := yamlfile.Normalize(v, "file")
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	return typeName(n)
}

// Dump writes the graph as a workflow file: its specification with every
// map's keys sorted, two-space indentation, sequences indented under
// their key, strings plain when that is unambiguous, multi-line strings
// as literal blocks and everything else double-quoted with JSON escapes,
// floats with a decimal point. The writer is this package's own, so the
// bytes depend on nothing but the specification: Dump is byte-stable
// (Parse then Dump of Dump's output gives the same bytes).
func Dump(g *Graph) []byte {
	return yamlfile.Dump(g.spec)
}
