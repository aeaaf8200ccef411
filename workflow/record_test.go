package workflow

import (
	"encoding/json"
	"testing"
	"time"
)

// TestRecordEncodingIsMarshal: the run record's header and steps are
// encoded by hand, byte for byte as json.Marshal encodes them.
func TestRecordEncodingIsMarshal(t *testing.T) {
	at := time.Date(2026, 11, 27, 7, 30, 1, 123456789, time.FixedZone("x", 3600))
	steps := []Step{
		{},
		{Node: "a", SessionID: "r/a", Status: StageDone, Output: "plain", StartedAt: at, DurationMS: 12,
			Usage: Usage{InputTokens: 3, OutputTokens: 4}},
		{Node: "b<&>", Status: StageFailed, Output: "line\n\"quoted\" \u2028 \xff", Error: "stage: <no>", StartedAt: at.UTC(),
			Vars: map[string]any{"n": int64(2), "f": 2.0, "list": []any{"x", nil, true}, "m": map[string]any{"k": "v"}}},
		{Node: "c", Vars: map[string]any{}},
	}
	for i := range steps {
		want, err := json.Marshal(&steps[i])
		if err != nil {
			t.Fatal(err)
		}
		got, err := steps[i].appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("step %d:\n got %s\nwant %s", i, got, want)
		}
	}
	for _, r := range []*Run{
		{Task: "t"},
		{Task: "fix <it> & \"go\"\n", Next: "b", Output: "out\t", Error: "e\u2028"},
	} {
		for _, vars := range []map[string]any{nil, {"a": int64(1), "b": []any{"x"}, "c": map[string]any{"d": 1.5}}} {
			r.reset(vars)
			for range 2 { // the cached prefix too
				want, err := json.Marshal(head{Task: r.Task, Vars: r.initialVars, Next: r.Next, Output: r.Output, Error: r.Error})
				if err != nil {
					t.Fatal(err)
				}
				if got := r.head(); string(got) != string(want) {
					t.Errorf("head:\n got %s\nwant %s", got, want)
				}
				r.Output += "<more>"
			}
		}
	}
}
