package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// evalSuite writes an eval of 20 cases (echo tasks against the fake
// OpenAI server: the reply to "q N" is "echo: q N") and 2 variants to
// dir; with broken set, the task asks the wrong question for half of
// them.
func evalSuite(t *testing.T, dir string, broken bool) string {
	t.Helper()
	var cases strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&cases, `{"id": "c%d", "q": "q %d", "expected": "echo: q %d"}`+"\n", i, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "cases.jsonl"), []byte(cases.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	question := `case["q"]`
	if broken {
		question = `case["q"] if int(case["id"][1:]) % 2 == 0 else "something else than " + case["q"]`
	}
	src := `DATASET = dataset("cases.jsonl")
VARIANTS = [{"name": "mini", "model": "gpt-4o-mini"}, {"name": "big", "model": "gpt-4o", "temperature": 0.2}]

def task(case, variant):
    r = llm_call(` + question + `, stream = False)
    return r["text"]

score_exact = exact()

def score_echoes(case, result):
    return {"score": 1.0 if result.startswith("echo:") else 0.0, "reason": "reply " + result}
`
	file := filepath.Join(dir, "echo_eval.star")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func runEvalCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := skein(append([]string{"eval"}, args...), stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

// TestEvalCacheAndRegression is the eval of the acceptance: 20 cases × 2
// variants × 2 repeats against a loopback OpenAI server prints the
// matrix and stores the run; the same eval again makes no provider
// request (the cache) and reports no regression; a change that breaks
// half the cases is a regression and --fail-under exits 1.
func TestEvalCacheAndRegression(t *testing.T) {
	fake := newFakeOpenAI(0)
	defer fake.Close()
	t.Setenv("OPENAI_BASE_URL", fake.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", fakeKey)
	dir := t.TempDir()
	store := filepath.Join(dir, "evals.db")
	file := evalSuite(t, dir, false)
	code, out, errOut := runEvalCLI(t, "--provider", "openai", "--store", store, "--repeat", "2", "-p", "4", "--json", filepath.Join(dir, "run1.json"), file)
	if code != exitOK {
		t.Fatalf("first run: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := fake.calls.Load(); n != 80 {
		t.Errorf("first run: %d provider requests, want 80 (20 cases × 2 variants × 2 repeats)", n)
	}
	for _, want := range []string{"20 cases × 2 variants × 2 repeats = 80 runs", "mini     exact   1.00", "big      echoes  1.00"} {
		if !strings.Contains(out, want) {
			t.Errorf("first run's report lacks %q:\n%s", want, out)
		}
	}
	var rec struct {
		ID      string `json:"id"`
		Results []struct {
			SessionID string `json:"session_id"`
			Calls     int    `json:"calls"`
		} `json:"results"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "run1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Results) != 80 || rec.Results[0].SessionID == "" || rec.Results[0].Calls != 1 {
		t.Fatalf("run 1 results: %d, first %+v", len(rec.Results), rec.Results[0])
	}
	// the case's session is stored, with its model call
	var sout, serr bytes.Buffer
	if code := skein([]string{"sessions", "show", "--store", store, rec.Results[0].SessionID}, stdio{in: &bytes.Buffer{}, out: &sout, err: &serr}); code != exitOK || !strings.Contains(sout.String(), "echo: q 1") {
		t.Errorf("the first case's session: exit %d\n%s%s", code, sout.String(), serr.String())
	}

	code, out, errOut = runEvalCLI(t, "--provider", "openai", "--store", store, "--repeat", "2", file)
	if code != exitOK {
		t.Fatalf("second run: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := fake.calls.Load(); n != 80 {
		t.Errorf("second run made %d provider requests, want none (the cache)", n-80)
	}
	if !strings.Contains(out, "compared with run "+rec.ID) || !strings.Contains(out, "no regression") || strings.Contains(out, "REGRESSION") {
		t.Errorf("second run's comparison:\n%s", out)
	}

	evalSuite(t, dir, true)
	code, out, errOut = runEvalCLI(t, "--provider", "openai", "--store", store, "--repeat", "2", "--fail-under", "exact=0.9", file)
	if code != exitFailed {
		t.Errorf("broken run: exit %d, want %d\n%s\n%s", code, exitFailed, out, errOut)
	}
	for _, want := range []string{"mini     exact   0.50", "-0.50  REGRESSION", "2 regressions", "newly failing (20): mini / c1 / exact"} {
		if !strings.Contains(out, want) {
			t.Errorf("broken run's report lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "skein eval: fail-under: exact under variant 'mini': mean 0.50 < 0.90") {
		t.Errorf("broken run's stderr: %s", errOut)
	}
	// only the changed requests reached the provider: 10 per variant and repeat
	if n := fake.calls.Load(); n != 80+40 {
		t.Errorf("broken run made %d provider requests, want 40", n-80)
	}
	// --no-cache sends everything
	before := fake.calls.Load()
	code, _, errOut = runEvalCLI(t, "--provider", "openai", "--store", store, "--no-cache", "--variant", "model=gpt-4o-mini,name=only", file)
	if code != exitOK {
		t.Fatalf("--no-cache run: exit %d\n%s", code, errOut)
	}
	if n := fake.calls.Load() - before; n != 20 {
		t.Errorf("--no-cache run made %d provider requests, want 20", n)
	}
}

// TestEvalExamples runs every examples/evals/*_eval.star the way its
// header says, twice with the default store: both succeed, and the
// second is compared with the first and reports no regression.
func TestEvalExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/evals/*_eval.star")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples/evals/*_eval.star")
	}
	for i, f := range files {
		if files[i], err = filepath.Abs(f); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SKEIN_STORE", "")
	t.Chdir(t.TempDir())
	for _, abs := range files {
		t.Run(filepath.Base(abs), func(t *testing.T) {
			args := evalHeaderArgs(t, abs)
			for run := 1; run <= 2; run++ {
				var out, errOut bytes.Buffer
				code := skein(args, stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
				if code != exitOK || !strings.Contains(out.String(), " runs in ") {
					t.Fatalf("run %d: skein %s exited %d\nstdout:\n%s\nstderr:\n%s", run, strings.Join(args, " "), code, out.String(), errOut.String())
				}
				if run == 2 && !strings.Contains(out.String(), "no regression") {
					t.Errorf("the second run reports a regression:\n%s", out.String())
				}
			}
		})
	}
}

// evalHeaderArgs is the `skein eval` command line of an example's header,
// its examples/evals/ paths made absolute.
func evalHeaderArgs(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(strings.TrimPrefix(line, "#")), "skein eval ")
		if !ok {
			continue
		}
		args := append([]string{"eval"}, shellWords(t, rest)...)
		for i, a := range args {
			if after, ok := strings.CutPrefix(a, "examples/evals/"); ok {
				args[i] = filepath.Join(filepath.Dir(file), after)
			}
		}
		return args
	}
	t.Fatalf("%s: its header has no '#   skein eval ...' line", file)
	return nil
}
