package builtins

import (
	"testing"

	"go.starlark.net/starlarkstruct"
)

// TestBuiltinToolSpecsMadeOnFirstUse: the predeclared names include every
// built-in tool, but a tool's description and JSON Schema are made only
// when something reads them (start-up: every run makes the tools module,
// few give a tool to a model), and then once per tool value.
func TestBuiltinToolSpecsMadeOnFirstUse(t *testing.T) {
	pre, err := Predeclared()
	if err != nil {
		t.Fatal(err)
	}
	mod, ok := pre["tools"].(*starlarkstruct.Module)
	if !ok {
		t.Fatalf("tools is %T", pre["tools"])
	}
	if len(mod.Members) != len(builtinTools()) {
		t.Fatalf("tools has %d members, want %d", len(mod.Members), len(builtinTools()))
	}
	for name, v := range mod.Members {
		tool, ok := v.(*builtinTool)
		if !ok {
			t.Fatalf("tools.%s is %T", name, v)
		}
		if _ = tool.String(); tool.schema.built {
			t.Errorf("tools.%s: its spec was made by Predeclared", name)
		}
		spec := tool.ToolSpec()
		if !tool.schema.built || spec.Name != name || spec.Description == "" || spec.Parameters["type"] != "object" {
			t.Errorf("tools.%s: spec %+v", name, spec)
		}
		if again := tool.ToolSpec(); again.Description != spec.Description {
			t.Errorf("tools.%s: a second read gave %q", name, again.Description)
		}
	}
}
