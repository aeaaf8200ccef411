package main

import (
	"os"
	"path/filepath"
	"testing"
)

// evictionScript runs a loop whose tool opens more sessions than the
// store holds (its default cap, 128), twice, and prints the loop's
// transcript afterwards.
const evictionScript = `
def open_many():
    """Open more sessions than the store holds."""
    for i in range(200):
        agent_session_open("other-%d" % i)
    return "opened"

llm_mock(tool_calls = [{"name": "open_many", "arguments": {}}])
llm_mock(tool_calls = [{"name": "open_many", "arguments": {}}])
llm_mock(text = "done")
s = agent_session_open("main")
r = agent_loop("go", provider = "mock", session_id = s, tools = [open_many])
print(r["text"], [m["role"] for m in agent_session_snapshot(s)["messages"]])
`

// TestRunningLoopSurvivesEviction runs a loop whose tool opens 200
// sessions, on every kind of store: the loop's own session must stay
// live (with --store memory, as skein test runs, eviction deleted it; on
// SQLite the loop failed on a reloaded copy and was healed as crashed).
func TestRunningLoopSurvivesEviction(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "evict.star")
	if err := os.WriteFile(script, []byte(evictionScript), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = `done ["user", "assistant", "tool", "assistant", "tool", "assistant"]` + "\n"
	for _, store := range []string{"memory", filepath.Join(dir, "s.db")} {
		if out := runSkein(t, "run", "--store", store, script); out != want {
			t.Errorf("--store %s printed %q, want %q", filepath.Base(store), out, want)
		}
	}
}
