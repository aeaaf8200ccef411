package agent

import (
	"fmt"

	"github.com/skein-dev/skein/llm/schema"
)

// SchemaTool is a Tool that keeps its parameter schema compiled, so a
// loop does not compile it again. Tools that do not implement it have
// their schema compiled once per loop, on first use.
type SchemaTool interface {
	Tool
	// ArgsSchema is Spec().Parameters compiled (nil: no constraint).
	ArgsSchema() *schema.Schema
}

// argsSchema returns the compiled parameter schema of tool, compiling and
// remembering it for the rest of the loop; nil when the tool declares no
// schema. A schema that does not compile is the tool author's mistake and
// stops the loop.
func (l *loop) argsSchema(tool Tool) (*schema.Schema, error) {
	if st, ok := tool.(SchemaTool); ok {
		return st.ArgsSchema(), nil
	}
	spec := tool.Spec()
	if spec.Parameters == nil {
		return nil, nil
	}
	if s, ok := l.schemas[spec.Name]; ok {
		return s, nil
	}
	s, err := schema.Compile(spec.Parameters)
	if err != nil {
		return nil, &ToolError{Fatal: true, Err: fmt.Errorf("tool %s: parameters: %v", spec.Name, err)}
	}
	if l.schemas == nil {
		l.schemas = map[string]*schema.Schema{}
	}
	l.schemas[spec.Name] = s
	return s, nil
}
