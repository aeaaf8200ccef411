package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/vm"
)

// writeTestTree writes files test files of perFile tests each under dir;
// every kind-th test of a file fails, errors or skips in turn.
func writeTestTree(t testing.TB, dir string, files, perFile int) {
	t.Helper()
	for f := 0; f < files; f++ {
		var src strings.Builder
		for i := 0; i < perFile; i++ {
			fmt.Fprintf(&src, "def test_%02d():\n", i)
			switch i % 7 {
			case 3:
				src.WriteString("    assert.eq(1, 2)\n\n")
			case 5:
				src.WriteString("    fail('boom')\n\n")
			case 6:
				src.WriteString("    skip('later')\n\n")
			default:
				fmt.Fprintf(&src, "    assert.eq(%d + 1, %d)\n\n", i, i+1)
			}
		}
		sub := filepath.Join(dir, fmt.Sprintf("pkg%d", f%3))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d_test.star", f)), []byte(src.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// skeinTest runs `skein test args...` in-process.
func skeinTest(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = skein(append([]string{"test"}, args...), stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
	return out.String(), errOut.String(), code
}

// testIDs returns the "file::test" of each test that finished in a
// --json stream, in order.
func testIDs(t *testing.T, stream string) []string {
	t.Helper()
	var ids []string
	for _, e := range parseTest2JSON(t, stream) {
		if e.Test != "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
			ids = append(ids, e.Package+"::"+e.Test)
		}
	}
	return ids
}

// test2jsonEvent is the event of `go test -json` as cmd/test2json
// defines it (`go doc cmd/test2json`): the fields its readers use.
type test2jsonEvent struct {
	Time        *time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     *float64
	Output      *string
	FailedBuild string
}

// parseTest2JSON decodes a --json stream strictly: one event per line,
// no field test2json does not have.
func parseTest2JSON(t *testing.T, stream string) []test2jsonEvent {
	t.Helper()
	var events []test2jsonEvent
	for _, line := range strings.Split(strings.TrimRight(stream, "\n"), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var e test2jsonEvent
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("not a test2json event: %q: %v", line, err)
		}
		events = append(events, e)
	}
	return events
}

// stripElapsed drops the elapsed time from the summary line.
func stripElapsed(report string) string {
	return regexp.MustCompile(` in \d+\.\d\ds\n$`).ReplaceAllString(report, "\n")
}

func TestJUnitReportParsesAndCountsMatch(t *testing.T) {
	dir := t.TempDir()
	writeTestTree(t, dir, 4, 9)
	report := filepath.Join(t.TempDir(), "junit.xml")
	stdout, _, code := skeinTest(t, "--junit", report, dir)
	if code != exitFailed {
		t.Fatalf("exit %d", code)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	// the shape CI systems read, parsed independently of the writer's types
	var doc struct {
		XMLName      xml.Name `xml:"testsuites"`
		TestsAttr    int      `xml:"tests,attr"`
		FailuresAttr int      `xml:"failures,attr"`
		ErrorsAttr   int      `xml:"errors,attr"`
		Suites       []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Errors   int    `xml:"errors,attr"`
			Skipped  int    `xml:"skipped,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("the JUnit report does not parse: %v\n%s", err, data)
	}
	var cases, failures, errs, skipped int
	for _, s := range doc.Suites {
		var sf, se, ss int
		for _, c := range s.Cases {
			if c.Failure != nil {
				sf++
			}
			if c.Error != nil {
				se++
			}
			if c.Skipped != nil {
				ss++
			}
		}
		if s.Tests != len(s.Cases) || s.Failures != sf || s.Errors != se || s.Skipped != ss {
			t.Errorf("suite %s: attributes tests=%d failures=%d errors=%d skipped=%d, cases %d/%d/%d/%d",
				s.Name, s.Tests, s.Failures, s.Errors, s.Skipped, len(s.Cases), sf, se, ss)
		}
		cases, failures, errs, skipped = cases+len(s.Cases), failures+sf, errs+se, skipped+ss
	}
	if len(doc.Suites) != 4 || cases != 36 {
		t.Fatalf("%d suites, %d cases; want 4, 36", len(doc.Suites), cases)
	}
	if doc.TestsAttr != cases || doc.FailuresAttr != failures || doc.ErrorsAttr != errs {
		t.Errorf("testsuites attributes %d/%d/%d, cases %d/%d/%d",
			doc.TestsAttr, doc.FailuresAttr, doc.ErrorsAttr, cases, failures, errs)
	}
	// and they agree with the summary line
	want := fmt.Sprintf("%d passed, %d failed, %d skipped\n", cases-failures-errs-skipped, failures+errs, skipped)
	if !strings.HasSuffix(stripElapsed(stdout), want) {
		t.Errorf("summary %q, want %q", stdout[strings.LastIndex(strings.TrimRight(stdout, "\n"), "\n")+1:], want)
	}
}

func TestShardsPartitionTheTests(t *testing.T) {
	dir := t.TempDir()
	writeTestTree(t, dir, 5, 8)
	full, _, _ := skeinTest(t, "--json", dir)
	all := testIDs(t, full)
	if len(all) != 40 {
		t.Fatalf("%d tests, want 40", len(all))
	}
	for n := 1; n <= 6; n++ {
		var union []string
		for i := 1; i <= n; i++ {
			out, _, _ := skeinTest(t, "--json", "--shard", fmt.Sprintf("%d/%d", i, n), dir)
			ids := testIDs(t, out)
			if len(ids) < len(all)/n || len(ids) > len(all)/n+1 {
				t.Errorf("shard %d/%d has %d tests, want about %d", i, n, len(ids), len(all)/n)
			}
			// the same shard is the same tests on every run (and machine)
			again, _, _ := skeinTest(t, "--json", "-parallel", "1", "--shard", fmt.Sprintf("%d/%d", i, n), dir)
			if !slices.Equal(testIDs(t, again), ids) {
				t.Errorf("shard %d/%d is not stable", i, n)
			}
			union = append(union, ids...)
		}
		slices.Sort(union)
		sorted := slices.Clone(all)
		slices.Sort(sorted)
		if !slices.Equal(union, sorted) {
			t.Errorf("the %d shards do not partition the tests: %d tests in the shards, %d in all", n, len(union), len(all))
		}
	}
}

func TestParallelReportsLikeSerial(t *testing.T) {
	dir := t.TempDir()
	writeTestTree(t, dir, 6, 10)
	serial, _, code1 := skeinTest(t, "-parallel", "1", dir)
	parallel, _, code2 := skeinTest(t, "-parallel", "4", dir)
	if stripElapsed(serial) != stripElapsed(parallel) || code1 != code2 {
		t.Fatalf("serial (exit %d):\n%s\nparallel (exit %d):\n%s", code1, serial, code2, parallel)
	}
	serialJSON, _, _ := skeinTest(t, "--json", "-parallel", "1", dir)
	parallelJSON, _, _ := skeinTest(t, "--json", "-parallel", "4", dir)
	if !slices.Equal(testIDs(t, serialJSON), testIDs(t, parallelJSON)) {
		t.Fatal("--json order differs between serial and parallel runs")
	}
}

func TestProgressLineOnlyOnATerminal(t *testing.T) {
	if newProgressLine(&bytes.Buffer{}) != nil {
		t.Fatal("a progress line on a buffer")
	}
	var nilLine *progressLine
	nilLine.update(1, 2, 0) // a nil line does nothing
	nilLine.clear()

	var buf bytes.Buffer
	rep := &textReport{w: &buf, line: &progressLine{w: &buf}}
	rep.progress(1, 3, 0)
	rep.result(vm.TestResult{File: "a_test.star", Name: "test_x", Status: vm.TestFail,
		Failures: []vm.Failure{{Pos: "a_test.star:2:14", Assertion: "assert.eq", Message: "1 != 2"}}})
	rep.progress(3, 3, 1)
	rep.done()
	want := "\r\033[Kskein test: 1/3 done, 0 failed" + "\r\033[K" +
		"FAIL  a_test.star::test_x\n    a_test.star:2:14: assert.eq: 1 != 2\n" +
		"\r\033[Kskein test: 3/3 done, 1 failed" + "\r\033[K"
	if buf.String() != want {
		t.Fatalf("got %q\nwant %q", buf.String(), want)
	}
}

// TestJSONIsTest2JSON reads `skein test --json` as a reader of `go test
// -json` would: every line an event with test2json's fields; each file
// a package that starts before its tests and passes or fails after them
// with its "ok"/"FAIL" line; each test a "run", output ("=== RUN", the
// "--- STATUS:" line) and one pass, fail or skip with its Elapsed; the
// counts those of the text report. -count 3 runs every test three times.
func TestJSONIsTest2JSON(t *testing.T) {
	dir := t.TempDir()
	writeTestTree(t, dir, 3, 7)
	if err := os.WriteFile(filepath.Join(dir, "broken_test.star"), []byte("x = (\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text, _, _ := skeinTest(t, "-parallel", "1", dir)
	for _, count := range []int{1, 3} {
		stream, stderr, code := skeinTest(t, "--json", "-count", fmt.Sprint(count), dir)
		if code != exitFailed || stderr != "" {
			t.Fatalf("-count %d: exit %d, stderr %q", count, code, stderr)
		}
		type pkgState struct {
			started, ended bool
			running        map[string]bool
			output         []string
		}
		pkgs := map[string]*pkgState{}
		var order []string
		tally := map[string]int{}
		for _, e := range parseTest2JSON(t, stream) {
			if e.Time == nil || e.Time.IsZero() || e.Package == "" {
				t.Fatalf("event without Time or Package: %+v", e)
			}
			p := pkgs[e.Package]
			if e.Action == "start" {
				if p != nil {
					t.Fatalf("package %s started twice", e.Package)
				}
				pkgs[e.Package] = &pkgState{started: true, running: map[string]bool{}}
				order = append(order, e.Package)
				continue
			}
			if p == nil || p.ended {
				t.Fatalf("%s event of %s outside its start and end", e.Action, e.Package)
			}
			if e.Output != nil {
				p.output = append(p.output, *e.Output)
			}
			switch {
			case e.Action == "run":
				p.running[e.Test] = true
			case e.Action == "output":
				if e.Test != "" && !p.running[e.Test] {
					t.Fatalf("output of %s::%s before its run", e.Package, e.Test)
				}
			case e.Action == "pass" || e.Action == "fail" || e.Action == "skip":
				if e.Elapsed == nil {
					t.Fatalf("%s without Elapsed: %+v", e.Action, e)
				}
				if e.Test == "" {
					p.ended = true
					if len(p.running) > 0 {
						t.Fatalf("package %s ended with tests running", e.Package)
					}
					continue
				}
				if !p.running[e.Test] {
					t.Fatalf("%s of %s::%s that is not running", e.Action, e.Package, e.Test)
				}
				delete(p.running, e.Test)
				tally[e.Action]++
			default:
				t.Fatalf("unexpected action %q", e.Action)
			}
		}
		if len(order) != 4 || order[0] != filepath.Join(dir, "broken_test.star") {
			t.Fatalf("-count %d: packages %v, want broken_test.star and the three files", count, order)
		}
		for _, name := range order {
			p := pkgs[name]
			last := p.output[len(p.output)-1]
			if !p.ended || !regexp.MustCompile(`^(ok  |FAIL)\t`+regexp.QuoteMeta(name)+`(\t\d+\.\d{3}s| \[load failed\])\n$`).MatchString(last) {
				t.Errorf("package %s: ended %v, last output %q", name, p.ended, last)
			}
		}
		// 3 files of 7: 4 pass, 1 fails, 1 errors, 1 skips each; the
		// broken file is a failed package, not a test
		if tally["pass"] != 12*count || tally["fail"] != 6*count || tally["skip"] != 3*count {
			t.Errorf("-count %d: %v, want 12/6/3 times %d", count, tally, count)
		}
		if !strings.Contains(text, "12 passed, 7 failed, 3 skipped in ") {
			t.Errorf("the text report counts differently:\n%s", text)
		}
		if !strings.Contains(stream, `"Output":"=== RUN   test_03\n"`) || !strings.Contains(stream, `"Output":"--- FAIL: test_03 (`) ||
			!strings.Contains(stream, `pkg0/f00_test.star:11:14: assert.eq: 1 != 2\n"`) {
			t.Errorf("the stream lacks go test's lines for a failing test:\n%s", stream)
		}
	}
}
