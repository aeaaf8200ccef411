package agent

import (
	"strings"
	"testing"
)

const reviewerFile = `description: Reviews diffs
model: openai/gpt-4o-mini
fallback_chain: [anthropic/claude-haiku-4-5]
system: |
  You review code in {{ctx.workingDir}}.
tools: [read_file]
approve: [read_file]
max_iterations: 30
temperature: 0.5
compaction: {compact_strategy: truncate, keep_last: 4}
`

func TestParseDumpIsByteStable(t *testing.T) {
	d, err := Parse([]byte(reviewerFile), "reviewer.agent.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "reviewer" || d.Model != "openai/gpt-4o-mini" || d.Options.Int("max_iterations") != 30 {
		t.Fatalf("decoded %+v", d)
	}
	dump := d.Dump()
	d2, err := Parse(dump, "other.agent.yaml", "")
	if err != nil {
		t.Fatalf("%v\n%s", err, dump)
	}
	if got := d2.Dump(); string(got) != string(dump) {
		t.Errorf("dump of dump differs:\n%s\n---\n%s", dump, got)
	}
	if d2.Fingerprint() != d.Fingerprint() {
		t.Error("fingerprints differ")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"model: x\nmax_iteration: 3\n", "line 2: unknown key 'max_iteration' (did you mean 'max_iterations'? expected one of: "},
		{"model: x\n\ntemperature: hot\n", "line 3: option 'temperature': got string, want float"},
		{"model: [x]\n", "line 1: 'model': got list, want string"},
		{"tools: [a]\napprove: [b]\n", "line 2: 'approve': 'b' is not one of the agent's tools (a)"},
		{"session_id: x\n", "line 1: unknown key 'session_id'"},
		{"output_schema: {type: nope}\n", "line 1: option 'output_schema': "},
		{"- a\n", "an agent file holds a map"},
	} {
		_, err := Parse([]byte(tc.file), "x.agent.yaml", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.file, err, tc.want)
		}
	}
}

func TestInterpolate(t *testing.T) {
	c := SessionContext{WorkingDir: "src", Variables: map[string]string{"team": "core"}}
	for in, want := range map[string]string{
		"in {{ctx.workingDir}} for {{ ctx.variables.team }}": "in src for core",
		"literal {{{{ctx.workingDir}}":                       "literal {{ctx.workingDir}}",
		"unset {{ctx.gitRef}}.":                              "unset .",
		"no placeholders":                                    "no placeholders",
	} {
		got, err := Interpolate(in, c)
		if err != nil || got != want {
			t.Errorf("Interpolate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"{{ctx.workingdir}}":     "unknown context key 'workingdir' (did you mean 'workingDir'?",
		"{{ctx.variables.nope}}": "unknown context variable 'nope'",
		"{{name}}":               "unknown placeholder '{{name}}'",
		"open {{ctx.workingDir":  "a '{{' is not closed",
	} {
		if _, err := Interpolate(in, c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Interpolate(%q): got %v, want %q", in, err, want)
		}
	}
}

func TestSystemPrompt(t *testing.T) {
	d := &Definition{Name: "r", System: "Review {{ctx.workingDir}}.\n", Skills: []Skill{{Name: "style", Description: "House style"}}}
	got, err := d.SystemPrompt(SessionContext{WorkingDir: "src", GitRef: "main"})
	want := "Review src.\n\n## Skills\n\nLoad a skill's instructions with the load_skill tool when the task needs it:\n\n- style: House style\n\n## Context\n\n- Working directory: src\n- Git ref: main"
	if err != nil || got != want {
		t.Errorf("got %q, %v\nwant %q", got, err, want)
	}
}

func TestContextSecretsAndKeys(t *testing.T) {
	if _, err := ParseContext(map[string]any{"fsScopeTier": "wide"}); err == nil || !strings.Contains(err.Error(), "unknown tier 'wide'") {
		t.Errorf("tier: %v", err)
	}
	c, err := ParseContext(map[string]any{"workingDir": "a", "variables": map[string]any{"x": "1"}})
	if err != nil || c.Map()["workingDir"] != "a" || c.Map()["variables"].(map[string]any)["x"] != "1" {
		t.Errorf("round trip: %v %v", c, err)
	}
}
