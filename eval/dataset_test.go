package eval

import (
	"strings"
	"testing"
)

func TestParseDataset(t *testing.T) {
	cases, err := ParseDataset("d.jsonl", []byte("\ufeff{\"id\": 1, \"q\": \"a\"}\n\n  {\"q\": \"b\", \"n\": 2.5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || cases[0]["id"] != int64(1) || cases[1]["n"] != 2.5 {
		t.Errorf("jsonl: %v", cases)
	}
	cases, err = ParseDataset("d.csv", []byte("id,\"q, quoted\"\n1,\"a, b\"\n2,c\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || cases[0]["q, quoted"] != "a, b" || cases[1]["id"] != "2" {
		t.Errorf("csv: %v", cases)
	}
	bad := []struct{ name, data, err string }{
		{"d.jsonl", "{\"a\": 1}\n{\"a\": \n", "d.jsonl: case 2 (line 2): "},
		{"d.jsonl", "{\"a\": 1}\n\n\"text\"\n", "d.jsonl: case 2 (line 3): got string, want a JSON object"},
		{"d.jsonl", "\n\n", "d.jsonl: no cases"},
		{"d.csv", "a,b,c\n1,2,3\n4,5\n", "d.csv: case 2 (line 3): 2 columns, want 3 (a, b, c)"},
		{"d.csv", "a,b,a\n1,2,3\n", "d.csv: header: column 'a' appears twice"},
		{"d.csv", "a,,c\n1,2,3\n", "d.csv: header: column 2 has no name"},
		{"d.csv", "", "d.csv: empty file"},
		{"d.csv", "a,b\n", "d.csv: no cases (only a header row)"},
		{"d.txt", "x", `d.txt: unknown dataset format '.txt' (expected .jsonl, .ndjson or .csv)`},
	}
	for _, tc := range bad {
		_, err := ParseDataset(tc.name, []byte(tc.data))
		if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("%s %q: got %v, want %q...", tc.name, tc.data, err, tc.err)
		}
	}
}

func TestStats(t *testing.T) {
	mean, low, high := meanCI([]float64{1, 1, 0, 0})
	if mean != 0.5 || low < 0 || high > 1 || !(low < 0.5 && high > 0.5) {
		t.Errorf("meanCI = %v %v %v", mean, low, high)
	}
	if m, l, h := meanCI([]float64{0.7}); m != 0.7 || l != 0.7 || h != 0.7 {
		t.Errorf("one value: %v %v %v", m, l, h)
	}
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if p50, p95 := percentile(sorted, 0.5), percentile(sorted, 0.95); p50 != 5 || p95 != 10 {
		t.Errorf("p50 %v p95 %v", p50, p95)
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
}

func TestCompareAndThresholds(t *testing.T) {
	mk := func(id string, pass []bool) *Record {
		r := &Record{ID: id, Variants: []Variant{{Name: "v"}}, Scorers: []string{"exact"}, Cases: len(pass), Repeat: 1}
		for i, p := range pass {
			sc := Score{Pass: p}
			if p {
				sc.Value = 1
			}
			r.Results = append(r.Results, CaseResult{Variant: "v", Case: string(rune('a' + i)), CaseIndex: i, Scores: map[string]Score{"exact": sc}})
		}
		r.Matrix = matrix(r)
		return r
	}
	base := mk("r1", []bool{true, true, true, true})
	same := Compare(mk("r2", []bool{true, true, true, true}), base)
	if same.Regressions != 0 || len(same.Deltas) != 1 || same.Deltas[0].Mean != 0 || len(same.NewlyFailing) != 0 {
		t.Errorf("unchanged: %+v", same)
	}
	worse := mk("r3", []bool{true, false, true, false})
	c := Compare(worse, base)
	if c.Regressions != 1 || !c.Deltas[0].Regression || c.Deltas[0].Mean != -0.5 || strings.Join(c.NewlyFailing, ";") != "v / b / exact;v / d / exact" {
		t.Errorf("worse: %+v", c)
	}
	th, err := ParseThreshold("score_exact=0.8")
	if err != nil || th != (Threshold{"exact", 0.8}) {
		t.Fatalf("%+v %v", th, err)
	}
	missed, err := Missed(worse, []Threshold{th})
	if err != nil || len(missed) != 1 || missed[0] != "exact under variant 'v': mean 0.50 < 0.80" {
		t.Errorf("missed %q %v", missed, err)
	}
	if _, err := Missed(worse, []Threshold{{"nope", 0.5}}); err == nil || err.Error() != "--fail-under: no scorer 'nope' (scorers: exact)" {
		t.Errorf("unknown scorer: %v", err)
	}
	for _, s := range []string{"exact", "=0.5", "exact=1.5", "exact=x"} {
		if _, err := ParseThreshold(s); err == nil {
			t.Errorf("ParseThreshold(%q) accepted", s)
		}
	}
}
