package workflow

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"name: a\nentry: a\nnodes:\n\ta: {mode: fn, fn: x}\n", "line 4: a tab character"},
		{"name: a\nname: b\n", "[2:1] mapping key \"name\" already defined at [1:1]"},
		{"- a\n", "the file must hold a map (name, entry, nodes, edges), got list"},
		{"", "got an empty document"},
		{"name: a\nentry: a\nnodes:\n  a: {mode: fn, fn: x, bogus: 1}\n", "node 'a': unknown key 'bogus'"},
		{"name: a\nentry: a\nnodes: {a: {mode: fn, fn: x}, b: {mode: fn, fn: x}}\nedges:\n  - {from: a, to: b, when: 'output +'}\n", "edge 0 (a -> b): when \"output +\""},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestDumpTriage(t *testing.T) {
	g := mustGraph(t, triage())
	out := Dump(g)
	want := `edges:
  - from: classify
    to: fix
    when: output contains "bug"
  - from: classify
    to: report
  - from: fix
    to: review
  - from: review
    to: fix
    when: visits["fix"] < 3 && !(output contains "LGTM")
  - from: review
    to: report
entry: classify
name: triage
nodes:
  classify:
    mode: llm
    prompt: "Classify this report: {task}"
  fix:
    max_iterations: 16
    mode: agent
    model_policy:
      provider: mock
      session_id: work
    prompt: "Fix it: {task}"
    tools:
      - read_file
  report:
    fn: report.star:write_report
    mode: fn
  review:
    input_contract:
      require_transcript: true
    mode: agent
    model_policy:
      session_id: work
    prompt: Review the fix of {outputs.fix}.
`
	if string(out) != want {
		t.Fatalf("dump:\n%s\nwant:\n%s", out, want)
	}
	g2, err := Parse(out)
	if err != nil || g2.Fingerprint() != g.Fingerprint() {
		t.Fatalf("reparse: %v (%s vs %s)", err, g2.Fingerprint(), g.Fingerprint())
	}
}

// TestDumpStable is the property test: for generated graphs, load ->
// dump -> load -> dump gives identical bytes, and the first load keeps
// the graph (same fingerprint).
func TestDumpStable(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	n := 300
	if testing.Short() {
		n = 50
	}
	for i := 0; i < n; i++ {
		spec := randomGraph(rng)
		g, err := Decode(spec)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		d1 := Dump(g)
		g1, err := Parse(d1)
		if err != nil {
			t.Fatalf("case %d: parse of\n%s\n%v", i, d1, err)
		}
		if g1.Fingerprint() != g.Fingerprint() {
			t.Fatalf("case %d: the file changed the graph:\n%s", i, d1)
		}
		d2 := Dump(g1)
		if !bytes.Equal(d1, d2) {
			t.Fatalf("case %d: dumps differ:\n%s\n---\n%s", i, d1, d2)
		}
	}
}

var pieces = []string{"a", "Z", " ", "  ", "\n", "\r", "\t", ":", ": ", "#", " #", "-", "- ", "'", "\"", "\\", "{{", "}}", "{task}", "[", "]", ",", "&", "*", "!", "|", ">", "%", "@", "`",
	"yes", "no", "true", "null", "~", "1", "0x1F", "1e3", ".5", "é", "日本", "\u2028", "\ufeff", "\x00", "\x7f", "😀", "---", "...", "? ", "on", "Off", "Y", "NaN", ".inf", "a:", "a: b"}

func randomString(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.Intn(6); n > 0; n-- {
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	return b.String()
}

func randomValue(rng *rand.Rand, depth int) any {
	switch k := rng.Intn(8); {
	case k == 0:
		return nil
	case k == 1:
		return rng.Intn(2) == 0
	case k == 2:
		return int64(rng.Intn(2000) - 1000)
	case k == 3:
		return []float64{0.5, -2.25, 1e-7, 3.0, 1e21, 100}[rng.Intn(6)]
	case k == 4 && depth < 3:
		l := make([]any, rng.Intn(3))
		for i := range l {
			l[i] = randomValue(rng, depth+1)
		}
		return l
	case k == 5 && depth < 3:
		m := map[string]any{}
		for n := rng.Intn(3); n > 0; n-- {
			m[randomString(rng)] = randomValue(rng, depth+1)
		}
		return m
	}
	return randomString(rng)
}

func randomGraph(rng *rand.Rand) map[string]any {
	n := 1 + rng.Intn(5)
	nodes := map[string]any{}
	var edges []any
	escape := strings.NewReplacer("{", "{{", "}", "}}")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("n%d", i)
		var node map[string]any
		switch rng.Intn(3) {
		case 0:
			node = map[string]any{"mode": "fn", "fn": "lib.star:" + name}
		case 1:
			node = map[string]any{"mode": "llm", "prompt": escape.Replace(randomString(rng)) + "{task}", "system": randomString(rng),
				"model_policy": map[string]any{"temperature": 0.25, "max_tokens": int64(100)}}
		default:
			node = map[string]any{"mode": "agent", "prompt": escape.Replace(randomString(rng)) + "{output}", "max_iterations": int64(1 + rng.Intn(9)),
				"tools": []any{"read_file"}, "stop": []any{randomString(rng)}, "timeout_s": 1.5}
		}
		nodes[name] = node
		if i > 0 {
			e := map[string]any{"from": fmt.Sprintf("n%d", rng.Intn(i)), "to": name}
			if rng.Intn(2) == 0 {
				e["when"] = fmt.Sprintf("output contains %q", randomString(rng))
			}
			edges = append(edges, e)
		}
	}
	spec := map[string]any{"name": "g " + randomString(rng), "entry": "n0", "nodes": nodes, "edges": edges}
	if rng.Intn(2) == 0 {
		spec["metadata"] = map[string]any{"skeinExport": randomValue(rng, 0), "notes": randomString(rng)}
	}
	if len(edges) == 0 {
		delete(spec, "edges")
	}
	return spec
}
