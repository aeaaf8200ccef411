package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamples runs every pipeline in examples/ the way a user would.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.star")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := skein(exampleArgs(file), stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
			if code != exitOK {
				t.Fatalf("skein run %s exited %d\nstdout:\n%s\nstderr:\n%s", file, code, out.String(), errOut.String())
			}
			if out.Len() == 0 {
				t.Fatalf("%s printed nothing", file)
			}
		})
	}
}

// exampleArgs is the command line that runs one example offline, with
// the in-memory store: the examples use fixed session ids, and a durable
// store would resume them on the next run (and leave .skein/ here).
func exampleArgs(file string) []string {
	switch filepath.Base(file) {
	case "code_agent.star":
		// Go is installed wherever these tests run; go test of the
		// sample project uses the build cache the tests have filled.
		return []string{"run", "--store", "memory", "--allow-cmd", "go", file}
	}
	return []string{"run", "--store", "memory", file}
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
			if code != exitOK || !strings.HasSuffix(out.String(), " passed, 0 failed\n") || strings.Contains(out.String(), "WARN") {
				t.Fatalf("skein test %s exited %d\nstdout:\n%s\nstderr:\n%s", dir, code, out.String(), errOut.String())
			}
		})
	}
}
