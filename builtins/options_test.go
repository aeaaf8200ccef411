package builtins

import (
	"slices"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/internal/didyoumean"
)

// TestAddingAnOption shows what adding an agent_loop option takes: one
// row in agent's one table (here in a copy of it, agent.Table.With) and
// reading it where it is used. The row alone gives the script's
// unknown-key list, type and range checks and default, the same checks
// and default for data (workflow nodes, agent files, the HTTP API:
// agent.Values), and the reference entry.
func TestAddingAnOption(t *testing.T) {
	row := agent.Option{Name: "max_replies", Kind: agent.KindInt, Min: 2, Default: 7, Doc: "An option added by a test."}
	table := agent.LoopOptions().With(row)
	table.Base = agent.CallOptions() // as agent_loop's reference shows it
	data, err := table.Parse(map[string]any{"max_replies": int64(4)})
	if err != nil || data.Int("max_replies") != 4 || table.Empty().Int("max_replies") != 7 {
		t.Fatalf("data: %v", err)
	}
	if _, err := table.Parse(map[string]any{"max_replies": int64(1)}); err == nil || err.Error() != "'max_replies' must be >= 2" {
		t.Errorf("data out of range: %v", err)
	}
	kw := func(k string, v starlark.Value) []starlark.Tuple { return []starlark.Tuple{{starlark.String(k), v}} }

	o, err := unpackOptions(table, "agent_loop", starlark.None, nil)
	if err != nil || o.int("max_replies") != 7 {
		t.Fatalf("default: %v, %v", o, err)
	}
	if o, err = unpackOptions(table, "agent_loop", starlark.None, kw("max_replies", starlark.MakeInt(3))); err != nil || o.int("max_replies") != 3 {
		t.Fatalf("given: %v", err)
	}
	for v, want := range map[starlark.Value]string{
		starlark.MakeInt(1):  "agent_loop: 'max_replies' must be >= 2",
		starlark.String("3"): "agent_loop: option 'max_replies': got string, want int",
	} {
		if _, err := unpackOptions(table, "agent_loop", starlark.None, kw("max_replies", v)); err == nil || err.Error() != want {
			t.Errorf("max_replies=%v: got %v, want %q", v, err, want)
		}
	}
	_, err = unpackOptions(table, "agent_loop", starlark.None, kw("max_reply", starlark.MakeInt(3)))
	if err == nil || !strings.Contains(err.Error(), "unknown option key 'max_reply' (did you mean 'max_replies'? expected one of: ") ||
		!strings.Contains(err.Error(), "max_nudges, max_replies, max_tokens") {
		t.Errorf("typo: %v", err)
	}
	var b strings.Builder
	writeOptionTable(&b, table)
	if !strings.Contains(b.String(), "| `max_replies` | int, >= 2 | 7 | An option added by a test. |") {
		t.Errorf("reference:\n%s", b.String())
	}
}

// TestOptionRowsAreDocumented fails when a row lacks what the reference
// needs.
func TestOptionRowsAreDocumented(t *testing.T) {
	for _, table := range optionTables() {
		if table.Intro == "" {
			t.Errorf("table %s has no intro", table.Title)
		}
		for _, r := range table.Rows() {
			if r.Doc == "" {
				t.Errorf("%s option %s has no doc", table.Title, r.Name)
			}
			if d, ok := r.Default.(string); r.Kind == agent.KindChoice && ok && !slices.Contains(r.Choices, d) {
				t.Errorf("%s option %s: default %v is not a choice", table.Title, r.Name, r.Default)
			}
		}
	}
}

func TestDidYouMean(t *testing.T) {
	names := agent.LoopOptions().Names()
	for key, want := range map[string]string{
		"max_iteration": "max_iterations", "temprature": "temperature", "sesion_id": "session_id",
		"bogus": "", "x": "", "model": "model",
	} {
		if got := didyoumean.Closest(key, names); got != want {
			t.Errorf("Closest(%q) = %q, want %q", key, got, want)
		}
	}
}
