package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// requireXMLLintEnv, set to 1 (as CI does), makes a missing xmllint a
// failure instead of a skip.
const requireXMLLintEnv = "SKEIN_REQUIRE_XMLLINT"

// TestJUnitReportValidatesAgainstXSD: a report with passes, failures,
// errors, skips, printed output and a file that does not load is valid
// against the Jenkins xUnit plugin's junit-10.xsd (testdata), checked by
// xmllint (Debian's libxml2-utils).
func TestJUnitReportValidatesAgainstXSD(t *testing.T) {
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		if os.Getenv(requireXMLLintEnv) == "1" {
			t.Fatalf("xmllint is not installed and %s=1", requireXMLLintEnv)
		}
		t.Skip("xmllint not found: install libxml2-utils (Debian) to validate the JUnit report against its schema")
	}
	dir := t.TempDir()
	writeTestTree(t, dir, 3, 8)
	if err := os.WriteFile(filepath.Join(dir, "out_test.star"), []byte("def test_prints():\n    print('<hello> & \"bye\"')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken_test.star"), []byte("def test_x(:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "junit.xml")
	if _, stderr, code := skeinTest(t, "--junit", report, dir); code != exitFailed {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	out, err := exec.Command(xmllint, "--noout", "--schema", filepath.Join("testdata", "junit-10.xsd"), report).CombinedOutput()
	if err != nil {
		data, _ := os.ReadFile(report)
		t.Fatalf("xmllint: %v\n%s\nthe report:\n%s", err, out, data)
	}
}
