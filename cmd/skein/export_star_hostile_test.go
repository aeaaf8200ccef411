package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// hostileOriginal makes a session whose title, metadata, prompt, reply,
// tool argument and tool result are read from in.json, so that any
// string reaches them without being quoted in the script first.
const hostileOriginal = `
d = json.decode(fs.read("in.json"))

def lookup(q = None):
    """Look something up."""
    return d["result"]

s = agent_session_open("fz", title = d["title"], metadata = d["metadata"])
llm_mock(tool_calls = [{"name": "lookup", "arguments": {"q": d["arg"]}}])
llm_mock(text = d["reply"])
agent_loop(d["prompt"], provider = "mock", session_id = s, tools = [lookup])
`

// exportRoundTrip stores a session made from in, exports it as a pipeline
// with its test, replays the pipeline offline in an empty directory and
// checks that the replay rebuilt the session (title, metadata, every
// message) and did nothing else: it printed only the last reply, wrote
// no file and the generated test passes. It reports false when skein
// refuses in (a title or a prompt it does not take).
func exportRoundTrip(t *testing.T, in map[string]any) bool {
	t.Helper()
	dir := t.TempDir()
	data, err := json.Marshal(in)
	if err != nil {
		return false
	}
	// what the script reads: JSON has no invalid UTF-8 (it becomes U+FFFD)
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatal(err)
	}
	orig, replay := filepath.Join(dir, "orig"), filepath.Join(dir, "replay")
	for _, d := range []string{orig, replay} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(orig, "in.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orig, "orig.star"), []byte(hostileOriginal), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	var out, errOut bytes.Buffer
	if code := skein([]string{"run", "--store", a, filepath.Join(orig, "orig.star")}, stdio{in: &bytes.Buffer{}, out: &out, err: &errOut}); code != exitOK {
		return false // refused: nothing to export
	}
	pipeline := filepath.Join(replay, "x.star")
	runSkein(t, "sessions", "export", "--store", a, "fz", "--format", "star", "--with-test", "-o", pipeline)
	got := runSkein(t, "run", "--store", b, "--llm-replay", filepath.Join(replay, "x.llm.jsonl"), pipeline)
	if want := in["reply"].(string) + "\n"; got != want {
		t.Errorf("the replay printed %q, want %q", got, want)
	}
	entries, err := os.ReadDir(replay)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"x.llm.jsonl", "x.star", "x_test.star"}; !slices.Equal(names, want) {
		t.Errorf("after the replay the directory holds %q, want %q", names, want)
	}
	if out := runSkein(t, "test", filepath.Join(replay, "x_test.star")); !strings.Contains(out, "1 passed, 0 failed") {
		t.Errorf("skein test of the generated test: %s", out)
	}
	ra, rb := storedSessions(t, a), storedSessions(t, b)
	if len(ra) != 1 || len(rb) != 1 {
		t.Fatalf("%d original and %d replayed sessions", len(ra), len(rb))
	}
	x, y := ra[0], rb[0]
	for _, rec := range []*sessions.Record{x, y} {
		for i := range rec.Messages {
			rec.Messages[i].ID, rec.Messages[i].CreatedAt = "", time.Time{}
			rec.Messages[i].ToolCallID = ""
			for j := range rec.Messages[i].ToolCalls {
				rec.Messages[i].ToolCalls[j].ID = "" // the replay's
			}
		}
	}
	if !reflect.DeepEqual(x.Messages, y.Messages) {
		t.Errorf("messages differ:\n\toriginal %+v\n\treplayed %+v", x.Messages, y.Messages)
	}
	if x.Title != y.Title || !reflect.DeepEqual(x.Metadata, y.Metadata) {
		t.Errorf("replayed title %q metadata %v, want %q %v", y.Title, y.Metadata, x.Title, x.Metadata)
	}
	return true
}

// TestExportStarHostileTitle exports sessions whose titles end the
// generated files' comment lines (Starlark ends a comment at \r as well
// as \n) and would run the rest as code: the replay must rebuild the
// session and run nothing else.
func TestExportStarHostileTitle(t *testing.T) {
	for _, title := range []string{
		"Q3\rfs.write(\"pwned.txt\", \"owned\");print(\"INJECTED\")#",
		"Q3\r\nprint(\"INJECTED\")",
		"Q3\nprint(\"INJECTED\")",
		"\rfs.write(\"pwned.txt\", \"owned\")\r",
		"Q3\u2028print(\"INJECTED\")\u0085x\x0bprint(\"INJECTED\")\x0c",
		"a\")\nprint(\"INJECTED\")\n#",
	} {
		in := map[string]any{"title": title, "metadata": map[string]any{"k\r": "v\rprint(1)"}, "prompt": "hi",
			"reply": "done", "arg": "a", "result": "r"}
		if !exportRoundTrip(t, in) {
			t.Errorf("title %q: the original run failed", title)
		}
	}
}

// FuzzExportStar round-trips arbitrary titles, metadata, prompts,
// replies and tool arguments and results through the star export: the
// replayed pipeline must rebuild the session and execute nothing else.
func FuzzExportStar(f *testing.F) {
	f.Add("Q3\rfs.write(\"pwned.txt\",\"owned\");print(\"INJECTED\")#", "k", "v", "hi", "done", "a", "r")
	f.Add("plain", "repo", "api", "Plan a trip.", "Sunny.\n\"q\" \\ b", "Lisbon", "sunny")
	f.Add("\x00\xff\u202e", "\u2028", "\\x41", "\r\n", "''' \"\"\"", "#", "\t")
	f.Fuzz(func(t *testing.T, title, key, val, prompt, reply, arg, result string) {
		in := map[string]any{"title": title, "metadata": map[string]any{key: val}, "prompt": prompt,
			"reply": reply, "arg": arg, "result": result}
		exportRoundTrip(t, in)
	})
}
