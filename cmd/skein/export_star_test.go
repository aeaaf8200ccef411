package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/sqlite"
	"github.com/skein-dev/skein/workflow"
)

// exportSession is a pipeline whose session has every kind of turn an
// export meets: tool calls (two in one reply, with arguments), a turn of
// two user messages, a turn cut short by max_iterations, a turn injected
// by the script, a rewind.
const exportSession = `
def weather(city, days = 1):
    """Weather in a city."""
    return "sunny in %s for %d days" % (city, days)

s = agent_session_open("trip", title = "Plan a trip to Lisbon!", metadata = {"repo": "travel", "ratio": 2.5})
agent_session_inject(s, {"role": "system", "content": "You plan trips."})
llm_mock(tool_calls = [{"name": "weather", "arguments": {"city": "Lisbon", "days": 2}}, {"name": "weather", "arguments": {"city": "Porto"}}])
llm_mock(text = "Sunny: walk to Belém.\n\"Quoted\" \\ back")
agent_loop("Plan a day in Lisbon.", provider = "mock", session_id = s, tools = [weather])
agent_session_inject(s, {"role": "user", "content": "Thanks."})
agent_loop("Anything else?", provider = "mock", session_id = s, tools = [weather])
llm_mock(tool_calls = [{"name": "weather", "arguments": {"city": "Faro"}}])
agent_loop("And Faro?", provider = "mock", session_id = s, tools = [weather], max_iterations = 1)
agent_session_inject(s, {"role": "user", "content": "Injected question"})
agent_session_inject(s, {"role": "assistant", "content": "Injected answer"})
agent_loop("Dropped later.", provider = "mock", session_id = s)
agent_session_rewind(s)
llm_mock(text = "Bye.")
agent_loop("Bye!", provider = "mock", session_id = s, tools = [weather])
`

// runSkein runs skein with args and fails the test unless it exits 0.
func runSkein(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := skein(args, stdio{in: &bytes.Buffer{}, out: &out, err: &errOut}); code != exitOK {
		t.Fatalf("skein %v exited %d:\n%s%s", args, code, out.String(), errOut.String())
	}
	return out.String()
}

// storedSessions returns the sessions of a database, oldest first.
func storedSessions(t *testing.T, db string) []*sessions.Record {
	t.Helper()
	b, err := sqlite.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	list, _, err := b.List(t.Context(), sessions.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*sessions.Record
	for i := len(list) - 1; i >= 0; i-- {
		rec, err := b.Load(t.Context(), list[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// TestExportStarReplay exports a session as a pipeline, twice (the same
// bytes), runs it offline with its fixture and checks that the replayed
// session has the original's transcript, message for message; and that
// the generated test passes.
func TestExportStarReplay(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("trip.star", []byte(exportSession), 0o644); err != nil {
		t.Fatal(err)
	}
	runSkein(t, "run", "--store", "a.db", "trip.star")
	files := []string{"out/trip.star", "out/trip.llm.jsonl", "out/trip_test.star"}
	if err := os.Mkdir("out", 0o755); err != nil {
		t.Fatal(err)
	}
	if out := runSkein(t, "sessions", "export", "--store", "a.db", "trip", "--format", "star", "--with-test", "-o", "out/trip.star"); out != "wrote out/trip.star, out/trip.llm.jsonl, out/trip_test.star\n" {
		t.Fatalf("export printed %q", out)
	}
	first := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first[f] = data
	}
	runSkein(t, "sessions", "export", "--store", "a.db", "trip", "--format", "star", "--with-test", "-o", "out/trip.star")
	for _, f := range files {
		if data, _ := os.ReadFile(f); !bytes.Equal(data, first[f]) {
			t.Errorf("%s differs between two exports", f)
		}
	}

	if out := runSkein(t, "run", "--store", "b.db", "--llm-replay", "out/trip.llm.jsonl", "out/trip.star"); out != "Bye.\n" {
		t.Errorf("the replay printed %q", out)
	}
	orig, replayed := storedSessions(t, "a.db"), storedSessions(t, "b.db")
	if len(orig) != 1 || len(replayed) != 1 {
		t.Fatalf("%d original and %d replayed sessions", len(orig), len(replayed))
	}
	a, b := orig[0], replayed[0]
	if len(a.Messages) != 16 {
		t.Fatalf("the original has %d messages", len(a.Messages))
	}
	// The replay stores new messages: new ids and times, the same content.
	for _, rec := range []*sessions.Record{a, b} {
		for i := range rec.Messages {
			rec.Messages[i].ID, rec.Messages[i].CreatedAt = "", time.Time{}
		}
	}
	if !reflect.DeepEqual(a.Messages, b.Messages) {
		for i := range max(len(a.Messages), len(b.Messages)) {
			var x, y *message.Message
			if i < len(a.Messages) {
				x = &a.Messages[i]
			}
			if i < len(b.Messages) {
				y = &b.Messages[i]
			}
			if !reflect.DeepEqual(x, y) {
				t.Errorf("message %d:\n\toriginal %+v\n\treplayed %+v", i, x, y)
			}
		}
	}
	if b.Title != a.Title || !reflect.DeepEqual(b.Metadata, a.Metadata) {
		t.Errorf("replayed title %q metadata %v, want %q %v", b.Title, b.Metadata, a.Title, a.Metadata)
	}
	if out := runSkein(t, "test", "out/trip_test.star"); !bytes.Contains([]byte(out), []byte("1 passed, 0 failed")) {
		t.Errorf("skein test of the generated test: %s", out)
	}
}

// TestExportWalkthrough runs the README's walk-through "From the REPL to a
// pipeline in CI" on examples/triage_export.star: find the session by its
// metadata, export it as a pipeline with its test, replay it offline and
// run the test.
func TestExportWalkthrough(t *testing.T) {
	example, err := filepath.Abs("../../examples/triage_export.star")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	t.Setenv("SKEIN_STORE", "")
	runSkein(t, "run", example)
	var list struct {
		Sessions []struct {
			ID    string `json:"id"`
			Label string `json:"label"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(runSkein(t, "sessions", "ls", "--where", `metadata.repo == "api" && turns >= 2`, "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].Label != "Triage: API timeouts" {
		t.Fatalf("ls --where found %+v", list.Sessions)
	}
	id := list.Sessions[0].ID
	runSkein(t, "sessions", "export", id, "--format", "star", "-o", "triage.star", "--with-test")
	if out := runSkein(t, "run", "--llm-replay", "triage.llm.jsonl", "triage.star"); out != "Check for connections that are opened and never closed.\n" {
		t.Errorf("the replay printed %q", out)
	}
	if out := runSkein(t, "test", "triage_test.star"); !strings.Contains(out, "1 passed, 0 failed") {
		t.Errorf("skein test: %s", out)
	}
	runSkein(t, "sessions", "export", id, "--format", "forensic", "-o", "triage.jsonl")
	runSkein(t, "sessions", "import", "triage.jsonl", "--id", "triage-copy")
	runSkein(t, "sessions", "export", id, "--format", "workflow", "-o", "triage.yaml")
	data, err := os.ReadFile("triage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := workflow.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "triage-api-timeouts" || len(g.Nodes) != 4 || g.Entry != "input" || !bytes.Equal(workflow.Dump(g), data) { // input, 2 turns, output
		t.Errorf("workflow export: %s with %d nodes:\n%s", g.Name, len(g.Nodes), data)
	}
}
