package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/skein-dev/skein/vm"
)

// reporter prints test results as runTests hands them over, in order.
// The results of one file come together (see repeatCases): fileStart
// comes before the first of them and fileDone after the last (byFile
// calls them).
type reporter interface {
	fileStart(path string, started time.Time)
	result(res vm.TestResult)
	fileDone(f fileOutcome)
	progress(done, total, failed int)
	done()
}

// fileOutcome is how the tests of one file went.
type fileOutcome struct {
	path    string
	elapsed time.Duration // from the start of its first test to the end of its last
	failed  bool          // a test failed or errored
	loadErr bool          // the file could not be loaded: its one result says why
}

// byFile hands results to a reporter and tells it where the results of
// each file start and end.
type byFile struct {
	reporter
	cur        *fileOutcome
	start, end time.Time
}

func (b *byFile) result(res vm.TestResult) {
	if b.cur != nil && b.cur.path != res.File {
		b.endFile()
	}
	if b.cur == nil {
		b.cur = &fileOutcome{path: res.File, loadErr: res.Name == ""}
		b.start, b.end = res.Started, res.Started
		b.reporter.fileStart(res.File, res.Started)
	}
	if end := res.Started.Add(res.Duration); end.After(b.end) {
		b.end = end
	}
	b.cur.failed = b.cur.failed || failed(res)
	b.reporter.result(res)
}

func (b *byFile) endFile() {
	b.cur.elapsed = b.end.Sub(b.start)
	b.reporter.fileDone(*b.cur)
	b.cur = nil
}

func (b *byFile) done() {
	if b.cur != nil {
		b.endFile()
	}
	b.reporter.done()
}

// noAssertions is the warning about a test that passed without asserting.
const noAssertions = "no assertions: the test checked nothing"

// testID names a test in reports: "file::test", or the file alone for a
// file that could not be loaded.
func testID(res vm.TestResult) string {
	if res.Name == "" {
		return res.File
	}
	return res.File + "::" + res.Name
}

// textReport is the human-readable report. Without -v it prints only
// failures, errors and warnings, with no durations, so it is the same
// for every -parallel; with -v it prints every test with its duration and
// output. On a terminal a progress line sits below the results.
type textReport struct {
	w       io.Writer
	verbose bool
	line    *progressLine // nil when w is not a terminal
}

var _ reporter = (*textReport)(nil)

func (r *textReport) result(res vm.TestResult) {
	r.line.clear()
	id := testID(res)
	timing := ""
	if r.verbose {
		timing = fmt.Sprintf(" (%.2fs)", res.Duration.Seconds())
	}
	switch res.Status {
	case vm.TestPass:
		if r.verbose {
			fmt.Fprintf(r.w, "PASS  %s%s\n", id, timing)
			writeIndented(r.w, res.Output)
		}
		if unasserted(res) {
			fmt.Fprintf(r.w, "WARN  %s: %s\n", id, noAssertions)
		}
	case vm.TestSkip:
		if r.verbose {
			reason := ""
			if res.SkipReason != "" {
				reason = ": " + res.SkipReason
			}
			fmt.Fprintf(r.w, "SKIP  %s%s%s\n", id, timing, reason)
			writeIndented(r.w, res.Output)
		}
	case vm.TestFail:
		fmt.Fprintf(r.w, "FAIL  %s%s\n", id, timing)
		writeIndented(r.w, res.Output)
		for _, f := range res.Failures {
			writeIndented(r.w, f.String())
		}
	default:
		fmt.Fprintf(r.w, "ERROR %s%s\n", id, timing)
		writeIndented(r.w, res.Output)
		writeIndented(r.w, res.Error)
	}
}

func (r *textReport) fileStart(string, time.Time) {}

// fileDone prints, with -v, a line per file as go test does per package:
// "ok" or "FAIL", the file and how long its tests took.
func (r *textReport) fileDone(f fileOutcome) {
	if !r.verbose || f.loadErr {
		return
	}
	r.line.clear()
	status := "ok"
	if f.failed {
		status = "FAIL"
	}
	fmt.Fprintf(r.w, "%-5s %s %.3fs\n", status, f.path, f.elapsed.Seconds())
}

func (r *textReport) progress(done, total, failed int) { r.line.update(done, total, failed) }

func (r *textReport) done() { r.line.clear() }

// writeIndented writes text with every line indented by four spaces.
func writeIndented(w io.Writer, text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	for _, line := range strings.Split(text, "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
}

// progressLine shows how far a run is on one terminal line, which results
// are printed above. A nil *progressLine does nothing.
type progressLine struct {
	w     io.Writer
	shown bool
}

// newProgressLine returns a progress line on w, or nil when w is not a
// terminal (plain output for logs and pipes).
func newProgressLine(w io.Writer) *progressLine {
	if !isTerminal(w) {
		return nil
	}
	return &progressLine{w: w}
}

func (p *progressLine) update(done, total, failed int) {
	if p == nil {
		return
	}
	fmt.Fprintf(p.w, "\r\033[Kskein test: %d/%d done, %d failed", done, total, failed)
	p.shown = true
}

func (p *progressLine) clear() {
	if p == nil || !p.shown {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
	p.shown = false
}

// tally counts results for the summary line.
type tally struct{ passed, failed, skipped int }

func (t *tally) add(res vm.TestResult) {
	switch res.Status {
	case vm.TestPass:
		t.passed++
	case vm.TestSkip:
		t.skipped++
	default:
		t.failed++
	}
}

// summary is the summary line: "N passed, N failed", ", N skipped"
// when any were, and " in 1.23s", the time the command took to load and
// run the tests.
func (t tally) summary(elapsed time.Duration) string {
	s := fmt.Sprintf("%d passed, %d failed", t.passed, t.failed)
	if t.skipped > 0 {
		s += fmt.Sprintf(", %d skipped", t.skipped)
	}
	return s + fmt.Sprintf(" in %.2fs", elapsed.Seconds())
}
