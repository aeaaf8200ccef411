package sessions

import (
	"fmt"
	"slices"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// WhereCond is one condition of a filter expression that the backends
// apply themselves (in SQL, through ListFilter.Conds) with the
// expression's own meaning:
//
//   - Field "id", "status" or "parent" ("" for a root session) with Op
//     "==", "!=" or "in" and a string (for "in", []string) Value;
//   - Field "turns" or "messages" with Op "==", "!=", "<", "<=", ">" or
//     ">=" and an int64 Value;
//   - Field "metadata.KEY" with Op "==" or "!=" and a string Value: "=="
//     holds when the metadata has that string under KEY, "!=" otherwise
//     (a missing key or a value of another type included).
type WhereCond struct {
	Field string
	Op    string
	Value any
}

// MetadataKey returns KEY of a condition on "metadata.KEY".
func (c WhereCond) MetadataKey() (string, bool) {
	const prefix = "metadata."
	if len(c.Field) > len(prefix) && c.Field[:len(prefix)] == prefix {
		return c.Field[len(prefix):], true
	}
	return "", false
}

// Conds returns the conditions of w that the backends can apply: those
// of its top-level conjunction (a && b && ...) that have one of
// WhereCond's forms, and whether they are all of w (then the backend's
// listing is w's, and nothing is left to filter in Go).
func (w *Where) Conds() (conds []WhereCond, exact bool) {
	return w.conds, w.exact
}

// whereConds splits the expression src into WhereConds (see Where.Conds).
func whereConds(src string) ([]WhereCond, bool) {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, false
	}
	var conds []WhereCond
	exact := true
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		if b, ok := n.(*ast.BinaryNode); ok && (b.Operator == "&&" || b.Operator == "and") {
			walk(b.Left)
			walk(b.Right)
			return
		}
		if c, ok := condOf(n); ok {
			conds = append(conds, c)
			return
		}
		exact = false
	}
	walk(tree.Node)
	return conds, exact
}

// mirrored is the operator of a comparison with its sides swapped ("" for
// an operator that is not a comparison).
func mirrored(op string) string {
	switch op {
	case "==", "!=":
		return op
	case "<":
		return ">"
	case "<=":
		return ">="
	case ">":
		return "<"
	case ">=":
		return "<="
	}
	return ""
}

// condOf returns n as a WhereCond, if it has one of its forms.
func condOf(n ast.Node) (WhereCond, bool) {
	b, ok := n.(*ast.BinaryNode)
	if !ok {
		return WhereCond{}, false
	}
	field, value, op := fieldOf(b.Left), b.Right, b.Operator
	if field == "" && b.Operator != "in" {
		field, value, op = fieldOf(b.Right), b.Left, mirrored(b.Operator)
	}
	switch {
	case field == "":
		return WhereCond{}, false
	case field == "id" || field == "status" || field == "parent":
		if s, ok := value.(*ast.StringNode); ok && (op == "==" || op == "!=") {
			return WhereCond{field, op, s.Value}, true
		}
		if a, ok := value.(*ast.ArrayNode); ok && op == "in" {
			var list []string
			for _, e := range a.Nodes {
				s, ok := e.(*ast.StringNode)
				if !ok {
					return WhereCond{}, false
				}
				list = append(list, s.Value)
			}
			return WhereCond{field, op, list}, len(list) > 0
		}
	case field == "turns" || field == "messages":
		if i, ok := value.(*ast.IntegerNode); ok && op != "" && op != "in" {
			return WhereCond{field, op, int64(i.Value)}, true
		}
	default: // metadata.KEY
		if s, ok := value.(*ast.StringNode); ok && (op == "==" || op == "!=") {
			return WhereCond{field, op, s.Value}, true
		}
	}
	return WhereCond{}, false
}

// fieldOf returns the WhereCond field that n names ("id", ...,
// "metadata.KEY"), or "".
func fieldOf(n ast.Node) string {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		if slices.Contains([]string{"id", "status", "parent", "turns", "messages"}, n.Value) {
			return n.Value
		}
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		key, kok := n.Property.(*ast.StringNode)
		if ok && kok && id.Value == "metadata" && !n.Optional && !n.Method && isMetadataKey(key.Value) {
			return "metadata." + key.Value
		}
	}
	return ""
}

// isMetadataKey reports whether k is a key a WhereCond names: letters,
// digits and underscores, not starting with a digit (what a backend can
// put in a JSON path as it is).
func isMetadataKey(k string) bool {
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return k != ""
}

// MatchConds reports whether a session matches every condition of conds
// (the meaning backends give them in SQL).
func MatchConds(conds []WhereCond, s *Summary) bool {
	for _, c := range conds {
		if !c.match(s) {
			return false
		}
	}
	return true
}

func (c WhereCond) match(s *Summary) bool {
	switch c.Field {
	case "id":
		return c.matchString(s.ID)
	case "status":
		return c.matchString(string(s.Status))
	case "parent":
		return c.matchString(s.ParentID)
	case "turns":
		return c.matchInt(int64(s.Turns))
	case "messages":
		return c.matchInt(int64(s.Length))
	}
	key, _ := c.MetadataKey()
	v, ok := s.Metadata[key].(string)
	return (ok && v == c.Value) == (c.Op == "==")
}

func (c WhereCond) matchString(v string) bool {
	switch c.Op {
	case "==":
		return v == c.Value
	case "!=":
		return v != c.Value
	}
	return slices.Contains(c.Value.([]string), v)
}

func (c WhereCond) matchInt(v int64) bool {
	n := c.Value.(int64)
	switch c.Op {
	case "==":
		return v == n
	case "!=":
		return v != n
	case "<":
		return v < n
	case "<=":
		return v <= n
	case ">":
		return v > n
	}
	return v >= n
}

// String returns the condition as expression text.
func (c WhereCond) String() string { return fmt.Sprintf("%s %s %#v", c.Field, c.Op, c.Value) }
