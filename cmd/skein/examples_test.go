package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestExamples runs every pipeline in examples/ the way a user would:
// with the default store (.skein/sessions.db under the working directory),
// twice in a row. The second run must succeed and print the same thing:
// an example never trips over the sessions its first run stored.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.star")
	if err != nil {
		t.Fatal(err)
	}
	flows, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, flows...)
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	for i, f := range files {
		if files[i], err = filepath.Abs(f); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SKEIN_STORE", "")
	t.Chdir(t.TempDir())
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var first string
			for run := 1; run <= 2; run++ {
				var out, errOut bytes.Buffer
				code := skein(exampleArgs(file), stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
				if code != exitOK {
					t.Fatalf("run %d: skein run %s exited %d\nstdout:\n%s\nstderr:\n%s", run, file, code, out.String(), errOut.String())
				}
				if out.Len() == 0 {
					t.Fatalf("%s printed nothing", file)
				}
				// go test's own timing ("0.23s" or "(cached)") is the one
				// thing a run of code_agent.star may change
				got := goTestTime.ReplaceAllString(out.String(), "${1}TIME")
				if run == 1 {
					first = got
				} else if got != first {
					t.Errorf("the second run printed something else:\n%s\nthe first:\n%s", got, first)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(".skein", "sessions.db")); err != nil {
		t.Errorf("the examples did not use the default store: %v", err)
	}
}

// goTestTime matches the time on a line of go test's output.
var goTestTime = regexp.MustCompile(`(?m)^(\s*ok\s+\S+\s+)(\(cached\)|[0-9.]+s)$`)

// exampleArgs is the command line that runs one example offline, as its
// header says.
func exampleArgs(file string) []string {
	switch filepath.Base(file) {
	case "code_agent.star":
		// Go is installed wherever these tests run; go test of the
		// sample project uses the build cache the tests have filled.
		return []string{"run", "--allow-cmd", "go", file}
	case "review.yaml":
		return []string{"run", "--provider", "mock", file, "--task", "a release note for 1.2"}
	}
	return []string{"run", file}
}

// TestExampleEvals runs the scripted evaluations under examples/ (every
// directory with *_test.star files) with `skein test`, as CI would.
func TestExampleEvals(t *testing.T) {
	files, err := filepath.Glob("../../examples/*/*_test.star")
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, f := range files {
		dirs[filepath.Dir(f)] = true
	}
	if !dirs[filepath.Join("../../examples", "evals")] {
		t.Fatal("no tests found in examples/evals")
	}
	for dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := skein([]string{"test", dir}, stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
			if code != exitOK || !strings.HasSuffix(stripElapsed(out.String()), " passed, 0 failed\n") || strings.Contains(out.String(), "WARN") {
				t.Fatalf("skein test %s exited %d\nstdout:\n%s\nstderr:\n%s", dir, code, out.String(), errOut.String())
			}
		})
	}
}
