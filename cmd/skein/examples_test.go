package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	agentFiles, err := filepath.Glob("../../examples/agents/*.agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, agentFiles...)
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
				code := skein(exampleArgs(t, file), stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
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

// exampleArgs is the command line that runs one example offline: the
// first `skein run` line of its header comment, with the example's path
// replaced by file. Running exactly what the header says keeps the
// header true.
func exampleArgs(t *testing.T, file string) []string {
	t.Helper()
	cmds := headerCommands(t, file)
	if len(cmds) == 0 {
		t.Fatalf("%s: its header names no '#   skein run ...' command line", file)
	}
	args := cmds[0][1:]
	rel := "examples/" + filepath.Base(file)
	if filepath.Base(filepath.Dir(file)) == "agents" {
		rel = "examples/agents/" + filepath.Base(file)
	}
	found := false
	for i, a := range args {
		if a == rel {
			args[i], found = file, true
		}
	}
	if !found {
		t.Fatalf("%s: its header's command %q does not name %s", file, cmds[0], rel)
	}
	return args
}

// headerCommands returns the `skein run` command lines of a file's
// opening comment ("#   skein run [flags] examples/x.star ..."), split
// into words as a shell would (quotes removed).
func headerCommands(t *testing.T, file string) [][]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if m := headerCommand.FindStringSubmatch(line); m != nil {
			cmds = append(cmds, shellWords(t, m[1]))
		}
	}
	return cmds
}

// headerCommand matches a command line of an example's header.
var headerCommand = regexp.MustCompile(`^#\s+(skein run .*\S)\s*$`)

// shellWords splits a command line into words, honouring single and
// double quotes (enough for the examples' headers and the docs).
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var word strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// docsExampleCommand matches a command in the README or docs/ that runs
// an example: "skein run ... examples/x.star ..." (or "go run ./cmd/skein
// run ..."), up to the end of the line or of an inline code span.
var docsExampleCommand = regexp.MustCompile("(?:go run \\./cmd/skein|skein) (run [^`\n]*examples/[^`\n]*[^`\n\\s.])")

// TestDocsRunExamplesAsTheirHeadersSay checks every command in README.md
// and docs/ that runs an example against the example's own header: a user
// who copies either gets the same run.
func TestDocsRunExamplesAsTheirHeadersSay(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../README.md")
	checked := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docsExampleCommand.FindAllStringSubmatch(string(data), -1) {
			words := append([]string{"skein"}, shellWords(t, m[1])...)
			var example string
			for _, w := range words {
				if strings.HasPrefix(w, "examples/") {
					example = w
				}
			}
			headers := headerCommands(t, filepath.Join("../..", example))
			match := false
			for _, h := range headers {
				match = match || slices.Equal(h, words)
			}
			if !match {
				t.Errorf("%s runs %q, but the header of %s says %q", filepath.Base(doc), strings.Join(words, " "), example, headers)
			}
			checked++
		}
	}
	if checked < 3 {
		t.Fatalf("found only %d commands that run an example in the docs", checked)
	}
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

// TestReviewExampleDoesWhatItsCommentSays: examples/review.yaml's comment
// says that with the mock the run is draft, review, publish.
func TestReviewExampleDoesWhatItsCommentSays(t *testing.T) {
	file, err := filepath.Abs("../../examples/review.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	var out, errOut bytes.Buffer
	code := skein([]string{"run", "--store", "memory", "--provider", "mock", file, "--task", "a release note for 1.2", "--json"}, stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var run struct {
		Steps []struct{ Node string } `json:"steps"`
	}
	if err := json.Unmarshal(out.Bytes(), &run); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, s := range run.Steps {
		nodes = append(nodes, s.Node)
	}
	if strings.Join(nodes, " ") != "draft review publish" {
		t.Errorf("the run's stages: %v", nodes)
	}
	comment, _ := os.ReadFile(file)
	if !strings.Contains(string(comment), "With the mock the run is draft, review, publish") {
		t.Error("the example's comment does not say what the run does")
	}
}
