package sessionstest

import (
	"reflect"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

// boundMetadata is the metadata of a session bound to an agent: its
// frozen snapshot (nested maps and lists, multi-line text, numbers) and
// its session context, as skein's agent binding stores them.
func boundMetadata() map[string]any {
	return map[string]any{
		"agent": "reviewer",
		"agent_snapshot": map[string]any{
			"name": "reviewer", "model": "openai/gpt-4o-mini", "max_iterations": int64(30), "temperature": 0.25,
			"fallback_chain": []any{"anthropic/claude-haiku-4-5"},
			"system":         "You review code in {{ctx.workingDir}}.\nBe brief — ünïcode too.\n",
			"skills":         []any{map[string]any{"name": "style", "description": "The house style", "body": "Short functions.\n"}},
			"specialists":    []any{map[string]any{"name": "tester", "model": "mock/t"}},
		},
		"session_context": map[string]any{"workingDir": "src", "variables": map[string]any{"team": "core"}},
	}
}

// testBoundReopen creates a session with a bound agent's metadata,
// closes the storage, reopens it in a new Store (a new process) and
// checks the snapshot comes back whole, in the record and the listing.
func testBoundReopen(t *testing.T, open opener) {
	h, closeFn := open()
	st, err := sessions.NewStore(h.b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.OpenWith(h.ctx(), "bound", sessions.OpenOptions{Info: sessions.Info{Metadata: boundMetadata()}}); err != nil {
		t.Fatal(err)
	}
	closeFn()

	h, _ = open()
	st, err = sessions.NewStore(h.b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Metadata(h.ctx(), "bound")
	if err != nil {
		t.Fatal(err)
	}
	if want := boundMetadata(); !reflect.DeepEqual(got, want) {
		t.Errorf("metadata after reopen:\n got %#v\nwant %#v", got, want)
	}
	list, _, err := h.b.List(h.ctx(), sessions.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || !reflect.DeepEqual(list[0].Metadata, boundMetadata()) {
		t.Errorf("listing: %#v", list)
	}
}
