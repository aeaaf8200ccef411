package main

import (
	"bytes"
	"path/filepath"
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
	return []string{"run", "--store", "memory", file}
}
