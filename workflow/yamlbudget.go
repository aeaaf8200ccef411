package workflow

import (
	"fmt"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// A workflow file is checked before it is decoded, so that a small
// hostile file cannot take the process down: a billion-laughs file (1 KB
// of aliases of aliases) expanded past 3 GB, and 40,000 nested sequences
// (80 KB) peaked at 2.5 GB, the parser's memory being quadratic in depth.

// MaxYAMLDepth is the deepest nesting of collections a workflow file may
// have (workflows need a handful of levels).
const MaxYAMLDepth = 64

// MaxYAMLNodes is how many values a workflow file may hold with its
// aliases expanded.
const MaxYAMLNodes = 100000

// checkYAMLShape refuses data nested deeper than MaxYAMLDepth, by a scan
// of its text before anything parses it, then holding more than
// MaxYAMLNodes values once its aliases are expanded, by a walk of its
// syntax tree (where aliases are not expanded).
func checkYAMLShape(data []byte) error {
	if err := checkTextDepth(data); err != nil {
		return err
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil // the decoder reports it, with its line
	}
	w := &yamlWalk{anchors: map[string]int{}}
	for _, doc := range f.Docs {
		if _, err := w.size(doc.Body, 0); err != nil {
			return err
		}
	}
	return nil
}

// checkTextDepth bounds the nesting the text can express: brackets and
// braces of flow collections (outside quotes and comments) and compact
// block sequences ("- - - x"), the two ways to nest deeply in a few
// bytes. Nesting by indentation costs a line per level and as many
// spaces, so it cannot go deep in a small file.
func checkTextDepth(data []byte) error {
	depth, line := 0, 1
	var quote byte
	atLineStart, dashes := true, 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			line++
			atLineStart, dashes = true, 0
			if quote == '"' || quote == '\'' {
				continue // a quoted scalar may span lines
			}
			continue
		}
		switch {
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
			continue
		case c == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\n'):
			for i < len(data) && data[i] != '\n' {
				i++
			}
			i--
			continue
		case (c == '"' || c == '\'') && depth > 0:
			quote = c
		case c == '[' || c == '{':
			depth++
		case (c == ']' || c == '}') && depth > 0:
			depth--
		}
		if atLineStart {
			switch {
			case c == ' ':
				continue
			case c == '-' && i+1 < len(data) && (data[i+1] == ' ' || data[i+1] == '\n'):
				dashes++
				continue
			}
			atLineStart = false
		}
		if depth+dashes > MaxYAMLDepth {
			return fmt.Errorf("line %d: nested deeper than %d levels", line, MaxYAMLDepth)
		}
	}
	return nil
}

// yamlWalk measures a syntax tree with its aliases expanded.
type yamlWalk struct {
	anchors map[string]int // anchor name -> size of its value, expanded
	total   int
}

// size returns the number of values n holds, aliases expanded, adding
// them to the total, and fails past the limits.
func (w *yamlWalk) size(n ast.Node, depth int) (int, error) {
	if n == nil {
		return 0, nil
	}
	if depth > MaxYAMLDepth {
		return 0, fmt.Errorf("line %d: nested deeper than %d levels", line(n), MaxYAMLDepth)
	}
	count := 1
	add := func(c ast.Node) error {
		k, err := w.size(c, depth+1)
		count += k
		return err
	}
	switch n := n.(type) {
	case *ast.AliasNode:
		k, ok := w.anchors[n.Value.String()]
		if !ok {
			return 0, nil // the decoder reports an unknown alias
		}
		w.total += k
		if w.total > MaxYAMLNodes {
			return 0, fmt.Errorf("line %d: aliases expand to more than %d values", line(n), MaxYAMLNodes)
		}
		return k, nil
	case *ast.AnchorNode:
		k, err := w.size(n.Value, depth)
		if err != nil {
			return 0, err
		}
		w.anchors[n.Name.String()] = k
		return k, nil
	case *ast.TagNode:
		return w.size(n.Value, depth)
	case *ast.MappingNode:
		for _, v := range n.Values {
			if err := add(v); err != nil {
				return 0, err
			}
		}
	case *ast.MappingValueNode:
		// a key and its value are one level: the mapping's
		count = 0
		for _, c := range []ast.Node{n.Key, n.Value} {
			k, err := w.size(c, depth)
			if err != nil {
				return 0, err
			}
			count += k
		}
		return count, nil
	case *ast.MappingKeyNode:
		return w.size(n.Value, depth)
	case *ast.SequenceNode:
		for _, v := range n.Values {
			if err := add(v); err != nil {
				return 0, err
			}
		}
	}
	w.total++
	if w.total > MaxYAMLNodes {
		return 0, fmt.Errorf("line %d: the file holds more than %d values", line(n), MaxYAMLNodes)
	}
	return count, nil
}

// line is n's line, for errors.
func line(n ast.Node) int {
	if t := n.GetToken(); t != nil && t.Position != nil {
		return t.Position.Line
	}
	return 0
}
