package schema_test

import (
	"fmt"

	"github.com/skein-dev/skein/llm/schema"
)

// An output contract: compile the schema once, validate each output.
func ExampleSchema_Validate() {
	contract, err := schema.Compile(map[string]any{
		"type":     "object",
		"required": []any{"verdict"},
		"properties": map[string]any{
			"verdict": map[string]any{"enum": []any{"bug", "feature"}},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(contract.Validate("output", map[string]any{"verdict": "bug"}))
	fmt.Println(contract.Validate("output", map[string]any{"verdict": "maybe"}))
	fmt.Println(contract.Validate("output", map[string]any{}))
	// Output:
	// <nil>
	// output.verdict: value must be one of 'bug', 'feature'
	// output: missing required property 'verdict'
}
