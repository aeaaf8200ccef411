package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requireGotestsumEnv, set to 1 (as CI does), makes a missing gotestsum
// a failure instead of a skip.
const requireGotestsumEnv = "SKEIN_REQUIRE_GOTESTSUM"

// TestGotestsumReadsTheJSONStream: gotestsum (the go test -json
// summarizer CI systems use) reads skein test --json: it counts the same
// tests, skips and failures as skein, names the failed tests and a file
// that did not load, and writes its own JUnit report from the stream.
func TestGotestsumReadsTheJSONStream(t *testing.T) {
	gotestsum, err := exec.LookPath("gotestsum")
	if err != nil {
		if os.Getenv(requireGotestsumEnv) == "1" {
			t.Fatalf("gotestsum is not installed and %s=1", requireGotestsumEnv)
		}
		t.Skip("gotestsum not found: go install gotest.tools/gotestsum@v1.13.0")
	}
	dir := t.TempDir()
	files := map[string]string{
		"a_test.star": `def test_add():
    print("hello from test_add")
    assert.eq(1 + 1, 2)

def test_wrong():
    assert.eq(1 + 1, 3)

def test_boom():
    fail("boom")

def test_later():
    skip("needs a model")
`,
		"broken_test.star":   "x = (\n",
		"sub/more_test.star": "def test_more():\n    assert.eq(2, 2)\n",
	}
	for name, src := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stream, stderr, code := skeinTest(t, "--json", dir)
	if code != exitFailed {
		t.Fatalf("skein test --json: exit %d: %s", code, stderr)
	}
	jsonFile := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(jsonFile, []byte(stream), 0o644); err != nil {
		t.Fatal(err)
	}
	junit := filepath.Join(t.TempDir(), "junit.xml")
	// --raw-command reads a go test -json stream from the command's
	// stdout (and exits with the command's status, cat's here)
	out, err := exec.Command(gotestsum, "--format", "testname", "--junitfile", junit, "--raw-command", "--", "cat", jsonFile).CombinedOutput()
	if err != nil {
		t.Fatalf("gotestsum: %v\n%s", err, out)
	}
	for _, want := range []string{
		"DONE 5 tests, 1 skipped, 3 failures",
		"PASS " + filepath.Join(dir, "a_test.star") + ".test_add",
		"FAIL " + filepath.Join(dir, "a_test.star") + ".test_wrong",
		"FAIL " + filepath.Join(dir, "a_test.star") + ".test_boom",
		"SKIP " + filepath.Join(dir, "a_test.star") + ".test_later",
		"PASS " + filepath.Join(dir, "sub", "more_test.star") + ".test_more",
		"=== FAIL: " + filepath.Join(dir, "broken_test.star"),
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("gotestsum's output lacks %q:\n%s", want, out)
		}
	}
	report, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(report), `name="test_wrong"`) {
		t.Errorf("gotestsum's JUnit report (%v):\n%s", err, report)
	}
}
