package builtins

import (
	"slices"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/vm"
)

// TestAddingAnOption shows what adding an agent_loop option takes: one
// row (here in a copy of the table) and reading it where it is used. The
// row alone gives the unknown-key list, the type and range checks, the
// default and the reference entry.
func TestAddingAnOption(t *testing.T) {
	table := newOptionTable("agent_loop", loopTable().Intro, callTable(), append(append([]option{}, loopRows...),
		option{Name: "max_replies", Kind: kindInt, Min: 2, Default: 7, Doc: "An option added by a test."}))
	kw := func(k string, v starlark.Value) []starlark.Tuple { return []starlark.Tuple{{starlark.String(k), v}} }

	o, err := table.unpack("agent_loop", starlark.None, nil)
	if err != nil || o.int("max_replies") != 7 {
		t.Fatalf("default: %v, %v", o, err)
	}
	if o, err = table.unpack("agent_loop", starlark.None, kw("max_replies", starlark.MakeInt(3))); err != nil || o.int("max_replies") != 3 {
		t.Fatalf("given: %v", err)
	}
	for v, want := range map[starlark.Value]string{
		starlark.MakeInt(1):  "agent_loop: 'max_replies' must be >= 2",
		starlark.String("3"): "agent_loop: option 'max_replies': got string, want int",
	} {
		if _, err := table.unpack("agent_loop", starlark.None, kw("max_replies", v)); err == nil || err.Error() != want {
			t.Errorf("max_replies=%v: got %v, want %q", v, err, want)
		}
	}
	_, err = table.unpack("agent_loop", starlark.None, kw("max_reply", starlark.MakeInt(3)))
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
		for _, r := range table.rows {
			if r.Doc == "" {
				t.Errorf("%s option %s has no doc", table.Title, r.Name)
			}
			if d, ok := r.Default.(string); r.Kind == kindChoice && ok && !slices.Contains(r.Choices, d) {
				t.Errorf("%s option %s: default %v is not a choice", table.Title, r.Name, r.Default)
			}
		}
	}
}

func TestDidYouMean(t *testing.T) {
	names := loopTable().names()
	for key, want := range map[string]string{
		"max_iteration": "max_iterations", "temprature": "temperature", "sesion_id": "session_id",
		"bogus": "", "x": "", "model": "model",
	} {
		if got := vm.Closest(key, names); got != want {
			t.Errorf("Closest(%q) = %q, want %q", key, got, want)
		}
	}
}
