package workflow

import (
	"strings"
	"testing"
)

// triage is the specification the tests build on: classify -> fix <->
// review -> report.
func triage() map[string]any {
	return map[string]any{
		"name": "triage", "entry": "classify",
		"nodes": map[string]any{
			"classify": map[string]any{"mode": "llm", "prompt": "Classify this report: {task}"},
			"fix": map[string]any{"mode": "agent", "prompt": "Fix it: {task}", "tools": []any{"read_file"},
				"model_policy": map[string]any{"session_id": "work", "provider": "mock"}, "max_iterations": 16},
			"review": map[string]any{"mode": "agent", "prompt": "Review the fix of {outputs.fix}.",
				"model_policy": map[string]any{"session_id": "work"}, "input_contract": map[string]any{"require_transcript": true}},
			"report": map[string]any{"mode": "fn", "fn": "report.star:write_report"},
		},
		"edges": []any{
			map[string]any{"from": "classify", "to": "fix", "when": `output contains "bug"`},
			map[string]any{"from": "classify", "to": "report"},
			map[string]any{"from": "fix", "to": "review"},
			map[string]any{"from": "review", "to": "fix", "when": `visits["fix"] < 3 && !(output contains "LGTM")`},
			map[string]any{"from": "review", "to": "report"},
		},
	}
}

func TestDecode(t *testing.T) {
	g, err := Decode(triage())
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "triage" || g.Entry != "classify" || len(g.Edges) != 5 || strings.Join(g.Order, ",") != "classify,fix,report,review" {
		t.Fatalf("graph: %+v", g)
	}
	fix := g.Nodes["fix"]
	if fix.Mode != ModeAgent || fix.ModelPolicy.SessionID != "work" || fix.Options["max_iterations"] != int64(16) || fix.Tools[0] != "read_file" {
		t.Fatalf("fix: %+v", fix)
	}
	if !g.Nodes["review"].RequireTranscript || g.Nodes["report"].Fn != "report.star:write_report" {
		t.Fatal("review or report decoded wrong")
	}
	g2, _ := Decode(triage())
	if g.Fingerprint() != g2.Fingerprint() || !strings.HasPrefix(g.Fingerprint(), "sha256:") {
		t.Fatalf("fingerprints %s %s", g.Fingerprint(), g2.Fingerprint())
	}
	other := triage()
	other["nodes"].(map[string]any)["fix"].(map[string]any)["max_iterations"] = 15
	g3, err := Decode(other)
	if err != nil || g3.Fingerprint() == g.Fingerprint() {
		t.Fatalf("a changed graph has the same fingerprint (%v)", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	node := func(name string, fields map[string]any) func(map[string]any) {
		return func(s map[string]any) {
			n := s["nodes"].(map[string]any)[name].(map[string]any)
			for k, v := range fields {
				if v == nil {
					delete(n, k)
				} else {
					n[k] = v
				}
			}
		}
	}
	edge := func(i int, fields map[string]any) func(map[string]any) {
		return func(s map[string]any) {
			e := s["edges"].([]any)[i].(map[string]any)
			for k, v := range fields {
				e[k] = v
			}
		}
	}
	tests := []struct {
		name   string
		change func(map[string]any)
		want   string
	}{
		{"unknown top key", func(s map[string]any) { s["nodez"] = 1 }, "graph: unknown key 'nodez' (did you mean 'nodes'? expected one of: agents, edges, entry, metadata, name, nodes)"},
		{"no name", func(s map[string]any) { delete(s, "name") }, "graph: missing 'name'"},
		{"entry missing", func(s map[string]any) { s["entry"] = "nope" }, "graph: entry 'nope' is not a node (nodes: classify, fix, report, review)"},
		{"nodes not map", func(s map[string]any) { s["nodes"] = []any{} }, "graph: 'nodes': got list, want a map of node name to node"},
		{"no nodes", func(s map[string]any) { s["nodes"] = map[string]any{} }, "graph: 'nodes' is empty"},
		{"unknown node key", node("fix", map[string]any{"promt": "x"}), "node 'fix': unknown key 'promt' (did you mean 'prompt'? expected one of: agent_ref, cache, compact_threshold,"},
		{"unknown mode", node("fix", map[string]any{"mode": "agnet"}), "node 'fix': unknown mode 'agnet' (expected one of: agent, fn, input, llm, output)"},
		{"missing prompt", node("fix", map[string]any{"prompt": nil}), "node 'fix': missing 'prompt'"},
		{"bad type", node("fix", map[string]any{"max_iterations": "3"}), "node 'fix': option 'max_iterations': got string, want int"},
		{"bad range", node("fix", map[string]any{"max_iterations": 0}), "node 'fix': 'max_iterations' must be >= 1"},
		{"loop option on llm", node("classify", map[string]any{"max_iterations": 2}), "node 'classify': option 'max_iterations' is not allowed on an llm node"},
		{"fn without fn", node("report", map[string]any{"fn": nil}), "node 'report': missing 'fn'"},
		{"prompt on fn", node("report", map[string]any{"prompt": "x"}), "node 'report': 'prompt' is not allowed on an fn node"},
		{"policy key", node("fix", map[string]any{"model_policy": map[string]any{"sesion_id": "x"}}), "node 'fix': model_policy: unknown key 'sesion_id' (did you mean 'session_id'? expected one of: api_version, base_url, max_tokens, model, provider, session_id, temperature)"},
		{"contract key", node("review", map[string]any{"input_contract": map[string]any{"transcript": true}}), "node 'review': input_contract: unknown key 'transcript' (expected one of: require_transcript)"},
		{"bad schema", node("fix", map[string]any{"output_contract": map[string]any{"json_schema": map[string]any{"type": 5}}}), "node 'fix': output_contract: json_schema:"},
		{"bad placeholder", node("fix", map[string]any{"prompt": "Fix {tsak}"}), "node 'fix': prompt: unknown placeholder {tsak}"},
		{"unclosed brace", node("fix", map[string]any{"prompt": "Fix {task"}), "node 'fix': prompt: unclosed '{' at offset 4"},
		{"outputs of no node", node("fix", map[string]any{"prompt": "{outputs.nope}"}), "node 'fix': prompt: {outputs.nope} names no node"},
		{"tools not names", node("fix", map[string]any{"tools": []any{1}}), "node 'fix': tools[0]: got int, want a tool name"},
		{"edge unknown node", edge(2, map[string]any{"to": "reviw"}), "edge 2 (fix -> reviw): 'to' names no node: 'reviw'"},
		{"edge unknown key", edge(1, map[string]any{"if": "true"}), "edge 1 (classify -> report): unknown key 'if' (expected one of: from, to, when)"},
		{"when syntax", edge(3, map[string]any{"when": "visits[ < 3"}), "edge 3 (review -> fix): when \"visits[ < 3\": "},
		{"when unknown name", edge(3, map[string]any{"when": "outptu == 'x'"}), "edge 3 (review -> fix): when \"outptu == 'x'\": unknown name outptu (did you mean output?) (line 1, column 1)"},
		{"when not bool", edge(3, map[string]any{"when": "output"}), "edge 3 (review -> fix): when \"output\": expected bool, but got string"},
		{"when not string", edge(3, map[string]any{"when": true}), "edge 3 (review -> fix): 'when': got bool, want an expression string"},
		{"unreachable", func(s map[string]any) { s["edges"] = s["edges"].([]any)[:2] }, "node 'review': unreachable from entry 'classify'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := triage()
			tc.change(s)
			_, err := Decode(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestTemplate(t *testing.T) {
	tests := []struct{ src, want string }{
		{"plain", "plain"},
		{"{task} then {output}", "T then O"},
		{"{outputs.a}/{outputs.b}", "A/"},
		{"{vars.n} {vars.s} {vars.l}", `3 s ["x"]`},
		{"{{literal}} }} {{", "{literal} } {"},
	}
	for _, tc := range tests {
		tpl, err := parseTemplate(tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		got, err := tpl.render("T", "O", map[string]string{"a": "A"}, map[string]any{"n": int64(3), "s": "s", "l": []any{"x"}})
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.src, got, err, tc.want)
		}
	}
	tpl, _ := parseTemplate("{vars.missing}")
	if _, err := tpl.render("", "", nil, nil); err == nil || !strings.Contains(err.Error(), "vars has no key 'missing'") {
		t.Fatalf("missing var: %v", err)
	}
	for _, bad := range []string{"a } b", "{ task }", "{vars.}", "{"} {
		if _, err := parseTemplate(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestConditionUnknownNameHint: a misspelt name in a condition says which
// it likely meant.
func TestConditionUnknownNameHint(t *testing.T) {
	_, err := compileCondition(`outpt contains "x"`)
	if err == nil || err.Error() != `when "outpt contains \"x\"": unknown name outpt (did you mean output?) (line 1, column 1)` {
		t.Fatalf("got %v", err)
	}
}
