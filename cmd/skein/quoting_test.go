package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// quotingRules are the patterns of error text in the module's sources
// that break docs/semantics.md's quoting rule: a name or a value taken
// from the script, the command line or the API (an unknown status,
// command, mode, provider, key, field, a tool call id) is quoted with
// single quotes, not Go's %q, and so is a "did you mean" suggestion.
// They are compiled when the test runs: a package-level regexp would
// count against the package's init allocations (TestPackageInitAllocations).
func quotingRules() []quotingRule {
	return []quotingRule{
		{regexp.MustCompile(`unknown [a-zA-Z_ -]+ %q`), `an unknown name quoted with %q (use '%s')`},
		{regexp.MustCompile(`did you mean %[sv]\?`), `a suggestion without quotes (use "did you mean '%s'?")`},
		{regexp.MustCompile(`tool calls? %q`), `a tool call id quoted with %q`},
		{regexp.MustCompile(`strconv\.Quote\(open`), `tool call ids quoted with strconv.Quote`},
	}
}

type quotingRule struct {
	re   *regexp.Regexp
	what string
}

// quotingExceptions are the files whose messages follow another tool's
// format, by path: the reason.
var quotingExceptions = map[string]string{
	// the suggestion extends Starlark's own "undefined: x", which quotes
	// nothing
	"vm/hint.go": "Starlark's format",
}

// TestErrorQuotingFollowsSemantics scans the Go sources (tests and
// testdata excepted) for error texts that quote a name the other way.
func TestErrorQuotingFollowsSemantics(t *testing.T) {
	root := "../.."
	rules := quotingRules()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if _, ok := quotingExceptions[filepath.ToSlash(rel)]; ok {
			return nil
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, r := range rules {
				if r.re.MatchString(line) {
					t.Errorf("%s:%d: %s: %s", rel, i+1, r.what, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
