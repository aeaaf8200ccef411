package workflow

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema compiles an output contract's JSON Schema (any draft the
// validator knows; 2020-12 when $schema is absent).
func compileSchema(schema map[string]any) (*jsonschema.Schema, error) {
	// The validator wants the schema as decoded by its own JSON reader
	// (json.Number numbers); a round trip through encoding/json gives that.
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output_contract.json", doc); err != nil {
		return nil, err
	}
	s, err := c.Compile("output_contract.json")
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, fmt.Errorf("%s", msg)
	}
	return s, nil
}

// checkOutput parses a stage's output as JSON and validates it against
// the node's output contract.
func (n *Node) checkOutput(output string) error {
	if n.schema == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(output))
	if err != nil {
		return fmt.Errorf("output_contract: the output is not JSON: %v", err)
	}
	if err := n.schema.Validate(v); err != nil {
		return fmt.Errorf("output_contract: %s", strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; "))
	}
	return nil
}
