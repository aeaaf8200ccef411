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

// exampleArgs is the command line that runs one example offline.
func exampleArgs(file string) []string {
	switch filepath.Base(file) {
	case "code_agent.star":
		// Go is installed wherever these tests run; go test of the
		// sample project uses the build cache the tests have filled.
		return []string{"run", "--allow-cmd", "go", file}
	}
	return []string{"run", file}
}
