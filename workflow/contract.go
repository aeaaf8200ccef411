package workflow

import (
	"encoding/json"
	"fmt"
	"strings"
)

// checkOutput parses a stage's output as JSON and validates it against
// the node's output contract (the JSON Schema validator agent tools use).
func (n *Node) checkOutput(output string) error {
	if n.contract == nil {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(output))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("output_contract: the output is not JSON: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("output_contract: the output is not JSON: more than one value")
	}
	if err := n.contract.Validate("output", v); err != nil {
		return fmt.Errorf("output_contract: %w", err)
	}
	return nil
}
